"""Agent-sized prompts at agent speed: time to first token of turn 2 against turn 1.

Codex and Claude Code resend everything on every turn: Codex its instructions, its tools and the
whole history (``store: false``), Claude Code 7 kB of system text and 12 tools with 37 kB of
schemas. A server that evaluates all of it again on each turn answers turn 2 as slowly as turn 1.
This benchmark sends, per API, a conversation of that size to ``hammer serve --openai`` (started here,
loopback only):

* **turn 1**: the system text, the tools and a question; the model answers with a tool call;
* **turn 2**: the same request plus that call and its result; the model answers in prose;
* **turn 3**: turn 2 plus that answer and a new question (the tools are offered again);
* **a new session**: the same system text and tools with another first question (a client started
  again), and its turn 2.

Both are streamed; the figure is the time from sending to the first streamed event that carries
output (a text delta, or a tool call's first event), and to the end. The request bodies are
synthetic (no client's own prompt text is copied) but of the captured sizes: Messages 7 kB of
system text and 12 tools totalling about 37 kB of JSON; Responses about 40 kB (developer text and
tools, one of them a namespace), as docs/server.md says.

Usage::

    .venv/bin/python benchmarks/agent_prompts.py [--rounds 2] [--backend llama_cpp|llama-server]
        [--n-ctx 32768] [--json docs/benchmarks/agent-prompts/<name>.json]

Each round uses fresh wording so no round reuses another's cache; turn 2 follows its own turn 1.

``--sessions`` replays two Claude-Code-like sessions instead (request 1 with a 9 kB environment block after the
first user message and ``metadata.session_id``; request 2 with the call's result; a side request with other
instructions; session 2's request 1 identical but for the session id, its request 2 different), once per
``--cache-ram`` value (default ``0 1024``: the memory prompt cache off, then on), on ``--backend llama_cpp``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from record import run_facts, write_record  # noqa: E402
from serve_process import hammer_serve  # noqa: E402

KEY = "bench-key"
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "description": "The city, e.g. Paris."}},
           "required": ["city"]}


def _filler(words: int, seed: str) -> str:
    """Plain, varied English of about ``words`` words (no client's text)."""
    base = ("When you work in this repository, read the relevant files before changing them, keep changes small, "
            "explain what you did and why, run the tests that cover your change, and never run commands that "
            "delete data or reach the network without asking first. ").split()
    return " ".join(f"{w}" if i % 17 else f"{w} ({seed}{i})" for i, w in enumerate(base * (words // len(base) + 1)))[
        : words * 7]


def _schema(i: int, properties: int) -> dict[str, Any]:
    props = {f"option_{i}_{j}": {"type": "string", "description": _filler(40, f"p{i}.{j}")} for j in range(properties)}
    return {"type": "object", "properties": props, "required": [next(iter(props))]}


def messages_body(seed: str) -> dict[str, Any]:
    """Claude Code's size: 7 kB of system text in blocks, 12 tools with ~37 kB of schemas, one question."""
    tools = [{"name": "get_weather", "description": "Get the current weather in a city.", "input_schema": WEATHER}]
    tools += [{"name": f"tool_{seed}_{i}", "description": _filler(60, f"d{i}"), "input_schema": _schema(i, 9)}
              for i in range(11)]
    system = [{"type": "text", "text": _filler(1000, seed)[:7000]}]
    return {"model": "hammer", "max_tokens": 32000, "system": system, "tools": tools, "stream": True,
            "messages": [{"role": "user", "content": f"What's the weather in Paris? ({seed})"}]}


def responses_body(seed: str) -> dict[str, Any]:
    """Codex's size: developer text, function tools and a namespace of five, ~40 kB, one question."""
    tools: list[dict[str, Any]] = [{"type": "function", "name": "get_weather",
                                    "description": "Get the current weather in a city.", "parameters": WEATHER}]
    tools += [{"type": "function", "name": f"tool_{seed}_{i}", "description": _filler(60, f"d{i}"),
               "parameters": _schema(i, 8)} for i in range(7)]
    tools.append({"type": "namespace", "name": "extra", "description": "More tools.", "tools": [
        {"type": "function", "name": f"ns_{i}", "description": _filler(40, f"n{i}"), "parameters": _schema(20 + i, 4)}
        for i in range(5)]})
    return {"model": "hammer", "stream": True, "store": False, "tools": tools, "tool_choice": "auto",
            "parallel_tool_calls": True, "reasoning": {"summary": "auto"},
            "input": [{"type": "message", "role": "developer",
                       "content": [{"type": "input_text", "text": _filler(1200, seed)[:8000]}]},
                      {"type": "message", "role": "user",
                       "content": [{"type": "input_text", "text": f"What's the weather in Paris? ({seed})"}]}]}


def stream(url: str, path: str, body: dict[str, Any]) -> tuple[float, float, list[dict[str, Any]]]:
    """(seconds to the first output event, seconds to the end, every event) of one streamed request."""
    started = time.perf_counter()
    first = None
    events = []
    headers = {"authorization": f"Bearer {KEY}", "x-api-key": KEY}
    with httpx.stream("POST", url + path, json=body, headers=headers, timeout=1800) as reply:
        assert reply.status_code == 200, reply.read()
        for line in reply.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            events.append(event)
            kind = event.get("type", "")
            if first is None and kind in ("response.output_text.delta", "response.output_item.added",
                                          "content_block_start"):
                first = time.perf_counter() - started
    return (first if first is not None else float("nan")), time.perf_counter() - started, events


def second_turn(api: str, body: dict[str, Any], events: list[dict[str, Any]]) -> dict[str, Any]:
    """Turn 1's body with its tool call and that call's result appended (the way each client resends it)."""
    result = "It is 18 C and sunny in Paris."
    if api == "messages":
        block = next(e["content_block"] for e in events if e["type"] == "content_block_start"
                     and e["content_block"]["type"] == "tool_use")
        arguments = "".join(e["delta"]["partial_json"] for e in events if e["type"] == "content_block_delta"
                            and e["delta"]["type"] == "input_json_delta")
        use = {**block, "input": json.loads(arguments or "{}")}
        return {**body, "messages": [*body["messages"], {"role": "assistant", "content": [use]},
                                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"],
                                                                   "content": result}]}]}
    item = next(e["item"] for e in events if e["type"] == "response.output_item.done"
                and e["item"]["type"] == "function_call")
    call = {k: item[k] for k in ("type", "call_id", "name", "arguments") if k in item}
    return {**body, "input": [*body["input"], call,
                              {"type": "function_call_output", "call_id": item["call_id"], "output": result}]}


def third_turn(api: str, body: dict[str, Any], answer: str) -> dict[str, Any]:
    """Turn 2's body with its answer and a new question (the agent loop's next request, tools offered again)."""
    question = "And what's the weather in Rome?"
    if api == "messages":
        return {**body, "messages": [*body["messages"], {"role": "assistant", "content": answer},
                                     {"role": "user", "content": question}]}
    return {**body, "input": [*body["input"], {"type": "message", "role": "assistant",
                                               "content": [{"type": "output_text", "text": answer}]},
                              {"type": "message", "role": "user", "content": [{"type": "input_text", "text": question}]}]}


def new_session(api: str, body: dict[str, Any]) -> dict[str, Any]:
    """Turn 1's body with another first question: the same client started again, same instructions and tools."""
    question = "What's the weather in Berlin?"
    if api == "messages":
        return {**body, "messages": [{"role": "user", "content": question}]}
    return {**body, "input": [*body["input"][:-1], {"type": "message", "role": "user",
                                                    "content": [{"type": "input_text", "text": question}]}]}


def claude_code_like(session_id: str) -> dict[str, Any]:
    """Claude Code's first request as a logging proxy saw it (2.1.332): system text, 12 tools, the first user
    message with a system-reminder, then a 9 kB environment block as its own message, and ``metadata``. A second
    session in the same HOME sends this body again byte for byte but for ``metadata.session_id``."""
    body = messages_body("cc")
    reminder = "<system-reminder>" + _filler(80, "reminder") + "</system-reminder>"
    environment = "<env>" + _filler(1300, "env")[:9000] + "</env>"
    return {**body, "metadata": {"user_id": "bench-user", "session_id": session_id},
            "messages": [{"role": "user", "content": [{"type": "text", "text": reminder},
                                                      {"type": "text", "text": "What's the weather in Paris?"}]},
                         {"role": "user", "content": environment}]}


def side_request() -> dict[str, Any]:
    """A request with other instructions between two sessions (an agent's title or summary request): it takes
    the context, so the next session finds its prompt only among kept states."""
    return {"model": "hammer", "max_tokens": 64, "stream": True, "system": _filler(300, "side")[:2000],
            "messages": [{"role": "user", "content": "Write a five-word title for: the weather in Paris."}]}


def sessions(url: str) -> list[dict[str, Any]]:
    """Session 1 (request 1, request 2 with the call's result), a side request, session 2 (request 1 identical to
    session 1's but for the session id; request 2 with another result): each request's times and cached tokens."""
    rows = []

    def send(name: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        ttft, total, events = stream(url, "/messages", body)
        usage = next(e["usage"] for e in events if e.get("type") == "message_delta")
        rows.append({"request": name, "ttft_s": round(ttft, 2), "total_s": round(total, 2),
                     "cached_tokens": usage["cache_read_input_tokens"], "evaluated_tokens": usage["input_tokens"],
                     "load_average": os.getloadavg()[0]})
        print(json.dumps(rows[-1]), flush=True)
        return events

    for session in ("s1", "s2"):
        if session == "s2":
            send("side", side_request())
        body = claude_code_like(f"session-{session}")
        events = send(f"{session} request 1", body)
        follow = second_turn("messages", body, events)
        if session == "s2":  # its later messages differ from session 1's
            follow["messages"][-1]["content"][0]["content"] = "It is 9 C and raining in Paris."
        send(f"{session} request 2", follow)
    return rows


def main_sessions(args: argparse.Namespace) -> int:
    """``--sessions``: the same replay on a server without the memory prompt cache, then with it (one run)."""
    runs = {}
    for cache_ram in args.cache_ram:
        serve = ["--openai", "--n-ctx", str(args.n_ctx), "--api-key", KEY, "--time-limit", "3600",
                 "--cache-ram", str(cache_ram)]
        cache = tempfile.mkdtemp(prefix="agent-prompts-kv-")  # an empty disk prefix cache for each server
        with hammer_serve(serve, env={"HAMMER_PREFIX_CACHE_DIR": cache}, startup=900) as server:
            runs[str(cache_ram)] = sessions(server.base_url)
            runs[str(cache_ram) + "_health"] = httpx.get(server.url + "/health").json().get("prompt_cache")
    for cache_ram in args.cache_ram:
        print(f"--cache-ram {cache_ram}: " + ", ".join(f"{r['request']} {r['total_s']} s ({r['cached_tokens']} cached)"
                                                   for r in runs[str(cache_ram)]))
    write_record(args.json, {**run_facts("benchmarks/agent_prompts.py --sessions"), "n_ctx": args.n_ctx, "runs": runs})
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--backend", default="llama_cpp", choices=["llama_cpp", "llama-server"])
    parser.add_argument("--n-ctx", type=int, default=32768)
    parser.add_argument("--apis", default="messages,responses", help="which APIs, comma-separated")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--sessions", action="store_true",
                        help="replay two Claude-Code-like sessions (Messages) with and without the memory prompt cache")
    parser.add_argument("--cache-ram", type=int, nargs="+", default=[0, 1024],
                        help="with --sessions: the --cache-ram values to compare, one server each")
    args = parser.parse_args()
    if args.sessions:
        return main_sessions(args)
    serve = ["--openai", "--backend", args.backend, "--n-ctx", str(args.n_ctx), "--api-key", KEY, "--time-limit", "3600"]
    rows: list[dict[str, Any]] = []
    # An empty prefix cache: first contact is a first contact, and a new session finds only what this run stored.
    cache = tempfile.mkdtemp(prefix="agent-prompts-kv-")
    with hammer_serve(serve, env={"HAMMER_PREFIX_CACHE_DIR": cache}, startup=900) as server:
        for round_ in range(args.rounds):
            for api, path, build in (("messages", "/messages", messages_body), ("responses", "/responses", responses_body)):
                if api not in args.apis.split(","):
                    continue
                body = build(f"r{round_}{api[0]}")
                ttft1, total1, events = stream(server.base_url, path, body)
                body2 = second_turn(api, body, events)
                ttft2, total2, events2 = stream(server.base_url, path, body2)
                text = "".join(e.get("delta", {}).get("text", "") if api == "messages" else e.get("delta", "")
                               for e in events2 if e.get("type") in ("content_block_delta", "response.output_text.delta"))
                ttft3, total3, _ = stream(server.base_url, path, third_turn(api, body2, text))
                again = new_session(api, body)
                ttft4, total4, events4 = stream(server.base_url, path, again)
                ttft5, total5, _ = stream(server.base_url, path, second_turn(api, again, events4))
                row = {"api": api, "round": round_, "request_bytes": len(json.dumps(body)), "turn1_ttft_s": ttft1,
                       "turn1_total_s": total1, "turn2_ttft_s": ttft2, "turn2_total_s": total2, "turn2_text": text,
                       "turn3_ttft_s": ttft3, "turn3_total_s": total3, "new_session_turn1_ttft_s": ttft4,
                       "new_session_turn1_total_s": total4, "new_session_turn2_ttft_s": ttft5,
                       "new_session_turn2_total_s": total5, "load_average": os.getloadavg()[0]}
                rows.append(row)
                print(json.dumps(row), flush=True)
    summary = {}
    for api in args.apis.split(","):
        mine = [r for r in rows if r["api"] == api]
        t1 = statistics.median(r["turn1_ttft_s"] for r in mine)
        t2 = statistics.median(r["turn2_ttft_s"] for r in mine)
        t3 = statistics.median(r["turn3_ttft_s"] for r in mine)
        t4 = statistics.median(r["new_session_turn1_ttft_s"] for r in mine)
        t5 = statistics.median(r["new_session_turn2_ttft_s"] for r in mine)
        summary[api] = {"turn1_ttft_s": t1, "turn2_ttft_s": t2, "turn3_ttft_s": t3, "new_session_turn1_ttft_s": t4,
                        "new_session_turn2_ttft_s": t5, "turn2_over_turn1": t2 / t1, "turn3_over_turn1": t3 / t1}
        print(f"{api:9s}  first token: turn 1 {t1:7.2f} s, turn 2 {t2:7.2f} s ({t2 / t1:.3f}x), "
              f"turn 3 {t3:7.2f} s ({t3 / t1:.3f}x), new session {t4:7.2f} s and {t5:7.2f} s")
    write_record(args.json, {**run_facts("benchmarks/agent_prompts.py"), "backend": args.backend, "n_ctx": args.n_ctx,
                             "rounds": args.rounds, "rows": rows, "summary": summary})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
