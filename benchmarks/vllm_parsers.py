"""Hammer's tool calling on vLLM four ways, side by side on the same BFCL questions.

The configurations, all on the same converted checkpoint (``scripts/install_vllm.sh``'s folder):

* ``a``: ``hammer serve --openai --backend server --base-url <vLLM>``: our engine in front (Hammer's
  prompt rendered by the engine, its grammar, parser and refusal mapping); vLLM only decodes;
* ``b``: vLLM alone with Hammer's chat template and tool-parser plugin (``--chat-template
  hammer_plugins/prompt/templates/hammer.jinja --tool-parser-plugin .../vllm_tool_parser.py --tool-call-parser
  hammer``), the flags tests/vllm/conftest.py uses;
* ``c``: vLLM with the checkpoint's own chat template and ``--tool-call-parser xlam``;
* ``d``: the same with ``--tool-call-parser hermes``.

Only ``a`` and ``b`` decode under a grammar (the engine's; the plugin sends it as
``structured_outputs``). ``c`` and ``d`` are free text that the parser reads afterwards: under
``tool_choice`` "auto" vLLM 0.32 constrains nothing for xlam, nor for hermes (its structural tag
applies only with ``--tool-strict-level`` above auto or tools marked ``strict``), which is how a
user who starts vLLM with those flags gets them.

``a`` and ``b`` share one vLLM process; ``c`` and ``d`` each get their own. The vLLM processes run
one after another, never two at once (vLLM on a small CPU machine takes most of it). Every one is
started with ``-O0 --max-model-len 4096 --dtype bfloat16 --generation-config vllm``,
``VLLM_CPU_KVCACHE_SPACE=2``, a random ``--api-key``, on loopback, with prefix caching left at vLLM's
default (whether it was on is read from vLLM's log and written to the summary).

The questions: ``--limit`` N (default 50) from a fixed seeded mix of BFCL ``simple_python``,
``multiple`` and ``parallel`` (seed 0, as ``hammer_evals.bfcl.accuracy.load_entries`` draws them),
interleaved and cut to N (50 = 17 + 17 + 16). Each is asked through the openai SDK's
``chat.completions`` with ``tools=[...]``, temperature 0, at 1, 2 and 4 concurrent clients. The
answer's ``tool_calls`` become BFCL output (``to_bfcl_output``) scored with bfcl-eval's checker
(``score``); an answer without tool calls is scored as an empty output (a wrong answer), not
skipped. Tool names with dots are sent with underscores (OpenAI's name pattern) and mapped back, as
BFCL's own OpenAI handler does. Before each (configuration, clients) run vLLM's prefix cache is
emptied (``/reset_prefix_cache``, vLLM's dev-mode route), so no run reuses the prompts of the one
before it; the hit rate each run got (vLLM's ``/metrics``) is reported beside it.

Then a smaller agent-shaped workload: the project's demo tools (``hammer_plugins.tools.demo``) on
every request, five three-turn conversations (question -> the model's call -> a made-up tool result
-> the model's answer -> a follow-up question -> the model's call), one conversation at a time,
against ``a`` and ``b`` with prefix caching on (emptied once before each), and against ``hammer
serve --openai --backend llama-server`` on the same model's GGUF (skipped, with a message, when the
llama-server binary is not built: ``bash scripts/build_llama_server.sh``). Reported: prompt tokens,
requests/s, and seconds per turn and per conversation.

Written under ``--out``: ``records.jsonl`` (one line per request), ``summary.json`` and
``table.md``.

Usage::

    .venv/bin/python benchmarks/vllm_parsers.py [--limit 50] [--clients 1,2,4] [--configs a,b,c,d]
        [--agent-conversations 5 | --no-agent] [--out docs/benchmarks/vllm]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from openai import AsyncOpenAI

from hammer_evals.bfcl.bfcl import BfclEntry, load_category, score, to_bfcl_output, to_openai_tools
from hammer_plugins import Tool
from hammer_plugins.cli.vllm_command import cpu_command, hammer_flags, minimal_environment
from hammer_plugins.launch import free_port
from hammer_plugins.launch.llama_server_binary import LlamaServerNotFoundError, find_llama_server
from hammer_plugins.tools.demo import DEMO_TOOLS

REPO = Path(__file__).resolve().parents[1]
VLLM_VERSION = "0.32.0"
SERVED = "hammer"
CATEGORIES = ("simple_python", "multiple", "parallel")
START_TIMEOUT = 900.0  # vLLM -O0 answered /health after 88-115 s on a loaded 2-core machine (docs/server.md)


@dataclass(frozen=True)
class Config:
    """One way of serving: which vLLM it needs and whether our engine sits in front of it."""

    key: str
    label: str
    upstream: str  # the vLLM process: "plugin", "xlam" or "hermes"
    front: bool


CONFIGS = {
    "a": Config("a", "hammer serve --openai --backend server -> vLLM", "plugin", True),
    "b": Config("b", "vLLM + hammer.jinja + hammer parser plugin", "plugin", False),
    "c": Config("c", "vLLM + checkpoint template + xlam parser", "xlam", False),
    "d": Config("d", "vLLM + checkpoint template + hermes parser", "hermes", False),
}
UPSTREAM_FLAGS: dict[str, list[str]] = {
    "plugin": hammer_flags(),
    # No --chat-template: vLLM uses the one the checkpoint's tokenizer_config.json carries.
    "xlam": ["--enable-auto-tool-choice", "--tool-call-parser", "xlam"],
    "hermes": ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"],
}
LLAMA_SERVER_FRONT = "hammer serve --openai --backend llama-server"


# --------------------------------------------------------------------------------------------- servers


def _child_setup() -> None:  # runs in the child between fork and exec
    # A script started in the background has SIGINT ignored, and children inherit that across exec:
    # the default dispositions back, so that our SIGINT to `hammer serve` is its Ctrl-C.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _wait_until(ready: Callable[[], bool], process: subprocess.Popen[bytes], what: str, log: Path,
                timeout: float) -> float:
    """Poll ``ready`` until it holds; seconds taken. Fails early, with the log's end, if the process died."""
    started = time.monotonic()
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode} before it was ready; {log} ends:\n{_tail(log)}")
        try:
            if ready():
                return time.monotonic() - started
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{what} was not ready within {timeout:.0f} s; {log} ends:\n{_tail(log)}")
        time.sleep(1)


def _stop_group(process: subprocess.Popen[bytes], first: int, grace: float) -> None:
    """``first`` to the process, then SIGKILL to its whole process group (vLLM's engine core, a
    front's children) whatever happened: nothing started here outlives the benchmark."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(first)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)


@dataclass
class Vllm:
    """A running vLLM: ``root`` is its own routes, ``base_url`` the OpenAI ones."""

    root: str
    api_key: str
    log: Path
    command: list[str]
    started_s: float
    prefix_caching: bool | None = None
    cache_resets: bool = True

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def reset_prefix_cache(self) -> bool:
        """Empty the prefix cache (a dev-mode route); False where this vLLM does not offer it or refused.

        vLLM refuses (``{"success": false}``) while blocks are held; the warm-up request just ended,
        so a few tries a moment apart are enough.
        """
        for _ in range(5):
            try:
                reply = httpx.post(f"{self.root}/reset_prefix_cache", headers=self._headers(), timeout=60)
            except httpx.HTTPError:
                return False
            if reply.status_code != 200:
                return False
            if reply.json().get("success", True):
                return True
            time.sleep(1)
        return False

    def prefix_cache_counters(self) -> tuple[float, float] | None:
        """``(hit tokens, queried tokens)`` so far, from ``/metrics``; None where it has no such counters."""
        try:
            text = httpx.get(f"{self.root}/metrics", headers=self._headers(), timeout=30).text
        except httpx.HTTPError:
            return None
        totals = {"hits": 0.0, "queries": 0.0}
        seen = False
        for line in text.splitlines():
            name = line.split("{")[0].split(" ")[0]
            for kind in totals:
                if name in (f"vllm:prefix_cache_{kind}_total", f"vllm:prefix_cache_{kind}"):
                    totals[kind] += float(line.rsplit(" ", 1)[1])
                    seen = True
        return (totals["hits"], totals["queries"]) if seen else None


@contextlib.contextmanager
def vllm_server(python: Path, model: Path, upstream: str, log_dir: Path) -> Iterator[Vllm]:
    """vLLM with ``upstream``'s tool flags, on loopback and a random key, until the block ends."""
    port = free_port()
    key = "sk-bench-" + secrets.token_urlsafe(16)
    log = log_dir / f"vllm-{upstream}.log"
    # -O0: no torch.compile warm-up (686 s against 115 s to /health here, docs/server.md); dev mode
    # for /reset_prefix_cache.
    command = cpu_command(str(python), str(model), port=port, served_name=SERVED,
                          extra=["-O0", "--host", "127.0.0.1", "--api-key", key, *UPSTREAM_FLAGS[upstream]])
    env = minimal_environment(VLLM_SERVER_DEV_MODE="1")
    print(f"[vllm-parsers] starting vLLM ({upstream}); log: {log}", file=sys.stderr, flush=True)
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=log_dir,
                                   start_new_session=True, preexec_fn=_child_setup)
    root = f"http://127.0.0.1:{port}"
    try:
        took = _wait_until(lambda: httpx.get(f"{root}/health", timeout=5).status_code == 200, process,
                           f"vLLM ({upstream})", log, START_TIMEOUT)
        shown = [("<random key>" if i > 0 and command[i - 1] == "--api-key" else part) for i, part in enumerate(command)]
        server = Vllm(root=root, api_key=key, log=log, command=shown, started_s=round(took, 1),
                      prefix_caching=_prefix_caching_from_log(log))
        print(f"[vllm-parsers] vLLM ({upstream}) answered /health after {took:.0f} s; prefix caching: "
              f"{server.prefix_caching}", file=sys.stderr, flush=True)
        yield server
    finally:
        _stop_group(process, signal.SIGTERM, 30)


def _prefix_caching_from_log(log: Path) -> bool | None:
    """Whether vLLM enabled prefix caching, from the engine configuration it logs at start."""
    found = re.findall(r"enable_prefix_caching=(True|False)", log.read_text(errors="replace"))
    return found[-1] == "True" if found else None


@contextlib.contextmanager
def hammer_front(arguments: list[str], env: dict[str, str], log: Path, timeout: float) -> Iterator[str]:
    """``hammer serve --openai <arguments>`` as users start it, until Ctrl-C (SIGINT) at the end; yields its /v1 URL."""
    port = free_port()
    command = [sys.executable, "-m", "hammer_plugins.cli", "serve", "--openai", *arguments,
               "--port", str(port), "--host", "127.0.0.1"]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ, **env},
                                   start_new_session=True, preexec_fn=_child_setup)
    try:
        _wait_until(lambda: bool(httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).json().get("loaded")),
                    process, "hammer serve --openai", log, timeout)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        # SIGINT: its graceful shutdown stops what it started (llama-server); the group kill follows anyway.
        _stop_group(process, signal.SIGINT, 60)


# --------------------------------------------------------------------------------------------- BFCL


def load_questions(limit: int, seed: int = 0) -> list[BfclEntry]:
    """``limit`` questions: a seeded sample of each category, interleaved (simple, multiple, parallel, ...)."""
    per = -(-limit // len(CATEGORIES))
    drawn = [load_category(category, per, seed)[0] for category in CATEGORIES]
    mixed = [entries[i] for i in range(per) for entries in drawn if i < len(entries)]
    return mixed[:limit]


def _calls(message: Any) -> tuple[list[dict[str, str]], list[tuple[str, dict[str, Any]]], bool]:
    """The reply's tool calls as sent, as ``(name, arguments)`` pairs, and whether any had unreadable arguments."""
    raw, parsed, malformed = [], [], False
    for call in message.tool_calls or []:
        raw.append({"name": call.function.name, "arguments": call.function.arguments})
        try:
            arguments = json.loads(call.function.arguments)
        except (TypeError, ValueError):
            malformed = True
            continue
        if not isinstance(arguments, dict):
            malformed = True
            continue
        parsed.append((call.function.name, arguments))
    return raw, parsed, malformed


async def ask(client: AsyncOpenAI, entry: BfclEntry, max_tokens: int) -> dict[str, Any]:
    """One BFCL question; its record with the checker's verdict (a failed request is a wrong answer)."""
    tools, names = to_openai_tools(entry.functions)
    record: dict[str, Any] = {"id": entry.id, "category": entry.category}
    started = time.perf_counter()
    try:
        reply = await client.chat.completions.create(model=SERVED, messages=entry.question, tools=tools,  # type: ignore[arg-type]
                                                     temperature=0, max_tokens=max_tokens)
    except Exception as exc:  # noqa: BLE001 - recorded and counted wrong, the run goes on
        record.update(seconds=round(time.perf_counter() - started, 3), failed=True, valid=False, malformed=False,
                      error=f"{type(exc).__name__}: {exc}"[:400], tool_calls=[], content=None, finish_reason=None)
        return record
    seconds = time.perf_counter() - started
    message = reply.choices[0].message
    raw, parsed, malformed = _calls(message)
    # No tool calls: scored as the empty output BFCL gives an answer it cannot decode.
    verdict = score(entry, to_bfcl_output([(names.get(name, name), arguments) for name, arguments in parsed]))
    record.update(seconds=round(seconds, 3), failed=False, valid=verdict.correct, error=verdict.error,
                  malformed=malformed, tool_calls=raw, content=message.content,
                  finish_reason=reply.choices[0].finish_reason,
                  prompt_tokens=reply.usage.prompt_tokens if reply.usage else None,
                  completion_tokens=reply.usage.completion_tokens if reply.usage else None)
    return record


async def _warmed_client(base_url: str, api_key: str) -> AsyncOpenAI:
    """A client whose first request is done: one-off work (a front's discovery, vLLM's first batch) stays unmeasured."""
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=1800)
    await client.chat.completions.create(model=SERVED, messages=[{"role": "user", "content": "Say hi."}],
                                         max_tokens=4, temperature=0)
    return client


async def run_level(base_url: str, api_key: str, entries: list[BfclEntry], clients: int, max_tokens: int,
                    before: Callable[[], None]) -> tuple[list[dict[str, Any]], float]:
    """Every entry asked by ``clients`` concurrent clients; the records and the wall time."""
    client = await _warmed_client(base_url, api_key)
    try:
        before()
        gate = asyncio.Semaphore(clients)

        async def one(entry: BfclEntry) -> dict[str, Any]:
            async with gate:
                return await ask(client, entry, max_tokens)

        started = time.perf_counter()
        records = await asyncio.gather(*(one(entry) for entry in entries))
        return list(records), time.perf_counter() - started
    finally:
        await client.close()


# --------------------------------------------------------------------------------------------- agent workload


@dataclass(frozen=True)
class Conversation:
    """A scripted three-turn conversation: what the user says, what the tools 'return'."""

    question: str
    first_tool: str
    result: str
    follow_up: str
    second_tool: str


CONVERSATIONS = [
    Conversation("What's the weather in Paris?", "get_weather",
                 '{"city": "Paris", "temperature": 18, "unit": "celsius", "condition": "cloudy"}',
                 "And in Rome, in fahrenheit?", "get_weather"),
    Conversation("What is 37 * 12?", "calculate", "444", "Now divide that by 4.", "calculate"),
    Conversation("What time is it in Tokyo? Tokyo is UTC+9.", "get_current_time", "2026-03-02T18:04:11+09:00",
                 "Email bob@example.com with the subject 'Call' saying that I will call him at 7pm Tokyo time.",
                 "send_email"),
    Conversation("Send an email to alice@example.com with the subject 'Lunch' saying 'See you at noon'.", "send_email",
                 '{"status": "sent", "to": "alice@example.com"}', "What's the weather in Berlin?", "get_weather"),
    Conversation("What is 2 to the power of 10?", "calculate", "1024", "What time is it in UTC right now?",
                 "get_current_time"),
]
DEMO_OPENAI_TOOLS = [Tool.from_function(function).to_openai() for function in DEMO_TOOLS]


def _turn_record(kind: str, turn: int, reply: Any, seconds: float, expected: str | None) -> dict[str, Any]:
    message = reply.choices[0].message
    raw, _, malformed = _calls(message)
    return {"turn": turn, "seconds": round(seconds, 3), "tool_calls": raw, "content": message.content,
            "finish_reason": reply.choices[0].finish_reason, "malformed": malformed,
            "expected_tool": expected, "right_tool": None if expected is None else [c["name"] for c in raw][:1] == [expected],
            "prompt_tokens": reply.usage.prompt_tokens if reply.usage else None,
            "completion_tokens": reply.usage.completion_tokens if reply.usage else None, "kind": kind}


async def converse(client: AsyncOpenAI, index: int, script: Conversation, max_tokens: int,
                   records: list[dict[str, Any]]) -> None:
    """Question -> call -> made-up result -> answer -> follow-up -> call; one record per request, into ``records``.

    The model's own calls go into the history when it made any (an agent runs what it gets); when it
    made none, the scripted call stands in, so every conversation keeps its shape and length.
    """
    messages: list[dict[str, Any]] = [{"role": "user", "content": script.question}]

    async def turn(number: int, expected: str | None) -> Any:
        started = time.perf_counter()
        reply = await client.chat.completions.create(model=SERVED, messages=messages, tools=DEMO_OPENAI_TOOLS,  # type: ignore[arg-type]
                                                     temperature=0, max_tokens=max_tokens)
        records.append({"conversation": index, **_turn_record("call" if expected else "answer", number, reply,
                                                              time.perf_counter() - started, expected)})
        return reply.choices[0].message

    first = await turn(1, script.first_tool)
    calls = [{"id": call.id or f"call_{index}_{n}", "type": "function",
              "function": {"name": call.function.name, "arguments": call.function.arguments}}
             for n, call in enumerate(first.tool_calls or [])]
    if not calls:
        calls = [{"id": f"call_{index}_scripted", "type": "function", "function": {"name": script.first_tool, "arguments": "{}"}}]
    messages.append({"role": "assistant", "content": None, "tool_calls": calls})
    messages += [{"role": "tool", "tool_call_id": call["id"], "content": script.result} for call in calls]
    answer = await turn(2, None)
    # A model that calls again instead of answering: a plain answer stands in, the conversation goes on.
    messages.append({"role": "assistant", "content": answer.content or f"The result is {script.result}."})
    messages.append({"role": "user", "content": script.follow_up})
    await turn(3, script.second_tool)


async def run_agent(base_url: str, api_key: str, conversations: list[Conversation], max_tokens: int,
                    before: Callable[[], None]) -> tuple[list[dict[str, Any]], float]:
    """The conversations one after another (as one agent); every request's record and the wall time."""
    client = await _warmed_client(base_url, api_key)
    try:
        before()
        records: list[dict[str, Any]] = []
        started = time.perf_counter()
        for index, script in enumerate(conversations):
            try:
                await converse(client, index, script, max_tokens, records)
            except Exception as exc:  # noqa: BLE001 - one broken conversation is reported, the others still run
                records.append({"conversation": index, "failed": True, "error": f"{type(exc).__name__}: {exc}"[:400]})
        return records, time.perf_counter() - started
    finally:
        await client.close()


# --------------------------------------------------------------------------------------------- summaries


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def summarize_level(config: str, clients: int, records: list[dict[str, Any]], wall: float,
                    cache: dict[str, Any]) -> dict[str, Any]:
    seconds = sorted(r["seconds"] for r in records)
    return {"config": config, "label": CONFIGS[config].label, "clients": clients, "n": len(records),
            "correct": sum(r["valid"] for r in records), "wall_s": round(wall, 2),
            "requests_per_s": round(len(records) / wall, 3) if wall else None,
            "median_s": _median(seconds), "p95_s": seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))] if seconds else None,
            "with_tool_calls": sum(bool(r["tool_calls"]) for r in records),
            "malformed": sum(r["malformed"] for r in records), "failed": sum(r["failed"] for r in records),
            "prompt_tokens": sum(r.get("prompt_tokens") or 0 for r in records), **cache}


def summarize_agent(label: str, records: list[dict[str, Any]], wall: float, cache: dict[str, Any]) -> dict[str, Any]:
    done = [r for r in records if not r.get("failed")]
    per_conversation: dict[int, float] = {}
    for r in done:
        per_conversation[r["conversation"]] = per_conversation.get(r["conversation"], 0.0) + r["seconds"]
    turn = {n: [r["seconds"] for r in done if r["turn"] == n] for n in (1, 2, 3)}
    prompt = [r["prompt_tokens"] for r in done if r.get("prompt_tokens") is not None]
    calls = [r for r in done if r["expected_tool"]]
    answers = [r for r in done if r["kind"] == "answer"]  # turn 2: after the tool result
    return {"server": label, "conversations": len({r["conversation"] for r in records}), "requests": len(done),
            "failed_conversations": sum(bool(r.get("failed")) for r in records), "wall_s": round(wall, 2),
            "requests_per_s": round(len(done) / wall, 3) if wall else None,
            "prompt_tokens": sum(prompt), "prompt_tokens_per_request": round(sum(prompt) / len(prompt)) if prompt else None,
            "completion_tokens": sum(r.get("completion_tokens") or 0 for r in done),
            "median_turn_s": {str(n): _median(v) for n, v in turn.items()},
            "mean_conversation_s": round(statistics.mean(per_conversation.values()), 2) if per_conversation else None,
            "right_tool": f"{sum(bool(r['right_tool']) for r in calls)}/{len(calls)}",
            "answered_in_prose": f"{sum(bool(r['content']) and not r['tool_calls'] for r in answers)}/{len(answers)}",
            **cache}


def _cache_delta(server: Vllm | None, before: tuple[float, float] | None, reset: bool | None) -> dict[str, Any]:
    """What vLLM's prefix cache did during a run: reset before it or not, and the share of prompt tokens it served."""
    if server is None:
        return {"prefix_caching": None, "cache_reset": None, "prefix_hit_pct": None}
    after = server.prefix_cache_counters()
    hit = None
    if before is not None and after is not None and after[1] > before[1]:
        hit = round(100 * (after[0] - before[0]) / (after[1] - before[1]), 1)
    return {"prefix_caching": server.prefix_caching, "cache_reset": reset, "prefix_hit_pct": hit}


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def tables(levels: list[dict[str, Any]], agent: list[dict[str, Any]]) -> str:
    lines = ["| config | clients | correct/N | req/s | median s | p95 s | with tool_calls | malformed | failed | "
             "prefix cache hit % |", "|---|---|---|---|---|---|---|---|---|---|"] if levels else []
    for s in levels:
        lines.append(f"| {s['config']}: {s['label']} | {s['clients']} | {s['correct']}/{s['n']} | {_cell(s['requests_per_s'])} | "
                     f"{_cell(s['median_s'])} | {_cell(s['p95_s'])} | {s['with_tool_calls']} | {s['malformed']} | "
                     f"{s['failed']} | {_cell(s['prefix_hit_pct'])} |")
    if agent:
        lines += ["", "Agent-shaped workload (demo tools on every request, 3-turn conversations, one at a time):", "",
                  "| server | conversations | requests | prompt tokens (per request) | req/s | median s turn 1 / 2 / 3 | "
                  "s per conversation | expected tool called | turn 2 in prose | prefix cache hit % |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for s in agent:
            turns = " / ".join(_cell(s["median_turn_s"][n]) for n in ("1", "2", "3"))
            lines.append(f"| {s['server']} | {s['conversations']} | {s['requests']} | {s['prompt_tokens']} "
                         f"({_cell(s['prompt_tokens_per_request'])}) | {_cell(s['requests_per_s'])} | {turns} | "
                         f"{_cell(s['mean_conversation_s'])} | {s['right_tool']} | {s['answered_in_prose']} | "
                         f"{_cell(s['prefix_hit_pct'])} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- main


@dataclass
class Run:
    """What one benchmark run gathered so far (written out even when it stops early)."""

    args: argparse.Namespace
    records_file: Path
    levels: list[dict[str, Any]] = field(default_factory=list)
    agent: list[dict[str, Any]] = field(default_factory=list)
    servers: list[dict[str, Any]] = field(default_factory=list)
    timings: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def write(self, records: list[dict[str, Any]]) -> None:
        with self.records_file.open("a", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")

    def timed(self, what: str, seconds: float) -> None:
        self.timings.append({"what": what, "seconds": round(seconds, 1)})
        print(f"[vllm-parsers] {what}: {seconds:.0f} s", file=sys.stderr, flush=True)

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"[vllm-parsers] {text}", file=sys.stderr, flush=True)


def _vllm_paths(args: argparse.Namespace) -> tuple[Path, Path]:
    """vLLM's python and the converted model folder (``scripts/install_vllm.sh`` prints it; a second run takes a second)."""
    cache = Path(os.environ.get("HAMMER_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                 / "hammer-plugins")
    home = Path(os.environ.get("HAMMER_VLLM_HOME") or cache / "vllm")
    python = args.vllm_python or home / f"venv-{VLLM_VERSION}" / "bin" / "python"
    if args.model_dir:
        return python, args.model_dir
    done = subprocess.run(["bash", str(REPO / "scripts" / "install_vllm.sh")], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "HAMMER_VENV": sys.prefix})
    if done.returncode != 0:
        raise SystemExit(f"scripts/install_vllm.sh failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return python, Path(done.stdout.strip().splitlines()[-1])


def bfcl_on(run: Run, server: Vllm, configs: list[Config], entries: list[BfclEntry], log_dir: Path) -> None:
    """Every configuration served by this vLLM, at every clients level (levels outer, so that drift
    in the machine's load hits the configurations alike)."""
    args = run.args
    with contextlib.ExitStack() as stack:
        urls: dict[str, tuple[str, str]] = {}
        for config in configs:
            if config.front:
                front_key = "sk-front-" + secrets.token_urlsafe(16)
                started = time.perf_counter()
                url = stack.enter_context(hammer_front(
                    ["--backend", "server", "--base-url", server.base_url, "--parallel", str(max(args.levels))],
                    {"HAMMER_SERVER_API_KEY": front_key, "HAMMER_UPSTREAM_API_KEY": server.api_key},
                    log_dir / "hammer-serve-server.log", 300))
                run.timed(f"{config.key}: hammer serve --openai start", time.perf_counter() - started)
                urls[config.key] = (url, front_key)
            else:
                urls[config.key] = (server.base_url, server.api_key)
        for clients in [] if args.no_bfcl else args.levels:
            for config in configs:
                url, key = urls[config.key]
                state: dict[str, Any] = {}

                def before(state: dict[str, Any] = state) -> None:
                    state["reset"] = server.reset_prefix_cache()
                    state["counters"] = server.prefix_cache_counters()

                records, wall = asyncio.run(run_level(url, key, entries, clients, args.max_tokens, before))
                summary = summarize_level(config.key, clients, records, wall,
                                          _cache_delta(server, state.get("counters"), state.get("reset")))
                run.write([{"part": "bfcl", "config": config.key, "clients": clients, **r} for r in records])
                run.levels.append(summary)
                run.timed(f"{config.key} x {clients} clients: {summary['correct']}/{summary['n']} correct, "
                          f"{summary['requests_per_s']} req/s", wall)
        if not args.no_agent:
            for config in configs:
                if config.key in ("a", "b"):
                    url, key = urls[config.key]
                    agent_on(run, CONFIGS[config.key].label, url, key, server)


def agent_on(run: Run, label: str, url: str, key: str, server: Vllm | None) -> None:
    state: dict[str, Any] = {}

    def before() -> None:
        if server is not None:  # the first conversation pays for the tools prefix, as a fresh agent would
            state["reset"] = server.reset_prefix_cache()
            state["counters"] = server.prefix_cache_counters()

    conversations = CONVERSATIONS[:run.args.agent_conversations]
    records, wall = asyncio.run(run_agent(url, key, conversations, run.args.max_tokens, before))
    summary = summarize_agent(label, records, wall, _cache_delta(server, state.get("counters"), state.get("reset")))
    run.write([{"part": "agent", "server": label, **r} for r in records])
    run.agent.append(summary)
    run.timed(f"agent workload on {label}: {summary['requests']} requests, {summary['requests_per_s']} req/s", wall)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=50, help="BFCL questions (default: %(default)s)")
    parser.add_argument("--clients", default="1,2,4", help="concurrent clients per run (default: %(default)s)")
    parser.add_argument("--configs", default="a,b,c,d", help="of a (engine in front), b (plugin), c (xlam), d (hermes)")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--agent-conversations", type=int, default=5, choices=range(1, len(CONVERSATIONS) + 1))
    parser.add_argument("--no-agent", action="store_true", help="skip the agent-shaped workload")
    parser.add_argument("--no-bfcl", action="store_true", help="the agent-shaped workload alone")
    parser.add_argument("--vllm-python", type=Path, default=None, help="default: install_vllm.sh's venv")
    parser.add_argument("--model-dir", type=Path, default=None, help="default: the folder install_vllm.sh prints")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks" / "vllm")
    args = parser.parse_args(argv)
    args.levels = [int(n) for n in args.clients.split(",")]
    chosen = [CONFIGS[key] for key in args.configs.split(",")]

    # SIGTERM ends the run like Ctrl-C does: through the finally blocks that stop every server. Ctrl-C
    # itself is re-armed: a run started in the background (`... &`) inherits SIGINT ignored.
    def terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    args.out.mkdir(parents=True, exist_ok=True)
    records_file = args.out / "records.jsonl"
    records_file.write_text("")
    run = Run(args, records_file)
    log_dir = Path(tempfile.mkdtemp(prefix="vllm-parsers-"))
    command = "python benchmarks/vllm_parsers.py " + " ".join(argv if argv is not None else sys.argv[1:])
    started = time.perf_counter()
    python, model = _vllm_paths(args)
    entries = [] if args.no_bfcl else load_questions(args.limit)
    print(f"[vllm-parsers] {len(entries)} questions ({', '.join(e.id for e in entries[:6])}...); model {model}; "
          f"logs in {log_dir}", file=sys.stderr, flush=True)
    try:
        # One vLLM at a time, each serving every chosen configuration that needs it.
        for upstream in ("plugin", "xlam", "hermes"):
            configs = [c for c in chosen if c.upstream == upstream]
            if not configs:
                continue
            began = time.perf_counter()
            with vllm_server(python, model, upstream, log_dir) as server:
                run.timed(f"vLLM ({upstream}) start", server.started_s)
                run.servers.append({"upstream": upstream, "configs": [c.key for c in configs], "command": server.command,
                                    "prefix_caching": server.prefix_caching, "seconds_to_health": server.started_s})
                bfcl_on(run, server, configs, entries, log_dir)
            run.timed(f"vLLM ({upstream}) in all, start to stop", time.perf_counter() - began)
        if not args.no_agent and any(c.key in ("a", "b") for c in chosen):
            try:
                find_llama_server()
            except LlamaServerNotFoundError:
                run.note(f"agent workload on `{LLAMA_SERVER_FRONT}` skipped: the llama-server binary is not built "
                         "(bash scripts/build_llama_server.sh builds it, about 6-8 min on 2 cores)")
            else:
                front_key = "sk-front-" + secrets.token_urlsafe(16)
                began = time.perf_counter()
                with hammer_front(["--backend", "llama-server", "--no-build", "--parallel", str(max(args.levels)),
                                   "--n-ctx", "4096"], {"HAMMER_SERVER_API_KEY": front_key},
                                  log_dir / "hammer-serve-llama-server.log", 600) as url:
                    run.timed(f"{LLAMA_SERVER_FRONT} start", time.perf_counter() - began)
                    agent_on(run, LLAMA_SERVER_FRONT + " (GGUF)", url, front_key, None)
    finally:
        text = tables(run.levels, run.agent)
        caching = {s["upstream"]: s["prefix_caching"] for s in run.servers}
        mix = ", ".join(f"{sum(e.category == c for e in entries)} {c}" for c in CATEGORIES)
        footer = (("no BFCL questions (--no-bfcl); " if args.no_bfcl else f"{len(entries)} BFCL questions ({mix}); ") +
                  f"vLLM prefix caching (from its log): {caching}, emptied before each run; "
                  f"{time.perf_counter() - started:.0f} s in all; command: {command}")
        print(text + "\n\n" + footer + ("\n" + "\n".join(run.notes) if run.notes else ""))
        (args.out / "table.md").write_text(text + "\n\n" + footer + "\n" + "".join(f"\n{n}\n" for n in run.notes))
        (args.out / "summary.json").write_text(json.dumps({
            "command": command, "model_dir": str(model), "vllm": VLLM_VERSION,
            "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                        "python": platform.python_version()},
            "questions": [e.id for e in entries], "max_tokens": args.max_tokens, "servers": run.servers,
            "bfcl": run.levels, "agent": run.agent, "timings": run.timings, "notes": run.notes,
            "logs": str(log_dir)}, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
