"""Load test of the server backend: N concurrent async sessions against an OpenAI-compatible server.

For each concurrency level N (default 1, 4, 16), N sessions loop on ``engine.astream`` for at most
``--duration`` seconds (and ``--max-requests`` requests in all), then the requests in flight are
drained. Every request carries an id: it asks ``What is <id> * 7?`` with the demo tools, and the
answer must be a ``calculate`` call whose expression starts with that id. So a request that is lost,
answered twice, or answered with another request's answer shows up in the checks:

* every id issued ends exactly once, as an answer or a recorded error;
* each answer names its own id (no cross-wiring between concurrent sessions);
* the backend counted exactly one completion per answer (no hidden duplicate sends).

Reported per N: requests, answers, errors by type, wrong answers, throughput (requests/s and
completion tokens/s), end-to-end latency and time-to-first-token percentiles, the most requests
the server had at once, and retries.

Without ``--base-url`` it starts each server of ``--servers`` in turn on loopback with the same
model and threads, side by side in one run: llama.cpp's C++ ``llama-server`` (``--parallel`` slots,
default the largest N; continuous batching) and llama-cpp-python's server (``--interrupt_requests
False``, as docs/server.md recommends; one request at a time, so its throughput cannot grow with N:
latency does). Before the levels, one unmeasured round of max(N) concurrent requests puts the tools
prefix in every slot (steady state); the cost of that cold round is reported too.

Usage::

    .venv/bin/python benchmarks/server_load.py [--concurrency 1,2,4] [--duration 60] [--max-requests 64]
        [--servers llama-server,llama-cpp-python] [--threads 2]
        [--base-url http://127.0.0.1:8080/v1 --model NAME --api-key KEY] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from hammer_plugins import HammerEngine, HammerResponse, Message, TextDelta
from hammer_plugins.backends.remote import OpenAICompatibleBackend
from hammer_plugins.launch import LlamaCppPythonServer
from hammer_plugins.tools.demo import DEMO_TOOLS


@dataclass
class Outcome:
    """How one request ended."""

    request_id: int
    session: int
    ok: bool
    latency: float
    ttft: float | None = None
    error: str | None = None
    answered_id: int | None = None  # the number the answer's expression starts with
    completion_tokens: int = 0


@dataclass
class Level:
    """Everything measured at one concurrency level."""

    concurrency: int
    issued: list[int] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    wall: float = 0.0
    completions_counted: int = 0
    retries: int = 0
    peak_in_flight: int = 0


def question(request_id: int) -> str:
    return f"What is {request_id} * 7?"


def answered_id(response: HammerResponse) -> int | None:
    """The id a ``calculate`` answer is about (the first number of its expression), if any."""
    if response.kind != "tool_calls" or response.tool_calls[0].name != "calculate":
        return None
    numbers = re.findall(r"\d+", str(response.tool_calls[0].arguments.get("expression", "")))
    return int(numbers[0]) if numbers else None


async def one_request(engine: HammerEngine, request_id: int, session: int) -> Outcome:
    started = time.perf_counter()
    first: float | None = None
    final: HammerResponse | None = None
    try:
        async for event in engine.astream([Message.user(question(request_id))], tools=DEMO_TOOLS):
            if isinstance(event, TextDelta) and first is None:
                first = time.perf_counter() - started
            elif isinstance(event, HammerResponse):
                final = event
    except Exception as exc:  # noqa: BLE001 - every failure is recorded, by type
        return Outcome(request_id, session, False, time.perf_counter() - started, first, error=type(exc).__name__)
    assert final is not None
    about = answered_id(final)
    return Outcome(request_id, session, about == request_id, time.perf_counter() - started, first,
                   error=None if about == request_id else "wrong_answer", answered_id=about,
                   completion_tokens=final.usage.completion_tokens)


async def run_level(engine: HammerEngine, backend: OpenAICompatibleBackend, n: int, duration: float,
                    max_requests: int, first_id: int) -> Level:
    level = Level(concurrency=n)
    next_id = first_id
    deadline = time.perf_counter() + duration
    before = (backend.stats.completions, backend.stats.retries)
    backend.stats.peak_in_flight = backend.stats.in_flight

    async def session(index: int) -> None:
        nonlocal next_id
        # Sessions stop taking new requests at the deadline or the request budget; the one in flight finishes.
        while time.perf_counter() < deadline and len(level.issued) < max_requests:
            request_id = next_id
            next_id += 1
            level.issued.append(request_id)
            level.outcomes.append(await one_request(engine, request_id, index))

    started = time.perf_counter()
    await asyncio.gather(*(session(i) for i in range(n)))
    level.wall = time.perf_counter() - started
    level.completions_counted = backend.stats.completions - before[0]
    level.retries = backend.stats.retries - before[1]
    level.peak_in_flight = backend.stats.peak_in_flight
    return level


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def summarize(level: Level) -> dict[str, Any]:
    ended = Counter(o.request_id for o in level.outcomes)
    answered = [o for o in level.outcomes if o.error is None or o.error == "wrong_answer"]
    latencies = [o.latency for o in answered]
    ttfts = [o.ttft for o in answered if o.ttft is not None]
    tokens = sum(o.completion_tokens for o in answered)
    return {
        "concurrency": level.concurrency,
        "requests": len(level.issued),
        "answered": len(answered),
        "correct": sum(o.ok for o in level.outcomes),
        "wrong_answers": sum(o.error == "wrong_answer" for o in level.outcomes),
        "errors": dict(Counter(o.error for o in level.outcomes if o.error not in (None, "wrong_answer"))),
        "lost": sorted(set(level.issued) - set(ended)),
        "ended_twice": sorted(i for i, c in ended.items() if c > 1),
        # A wrong answer that is about another request of this run would mean crossed responses.
        "cross_wired": [o.request_id for o in level.outcomes if o.error == "wrong_answer"
                        and o.answered_id in set(level.issued) - {o.request_id}],
        "server_completions_match": level.completions_counted == len(answered),
        "wall_s": round(level.wall, 2),
        "throughput_rps": round(len(answered) / level.wall, 3) if level.wall else 0.0,
        "completion_tokens_per_s": round(tokens / level.wall, 2) if level.wall else 0.0,
        "latency_s": {**{f"p{q}": _round(percentile(latencies, q)) for q in (50, 90, 99)},
                      "max": _round(max(latencies, default=None))},
        "ttft_s": {f"p{q}": _round(percentile(ttfts, q)) for q in (50, 90)},
        "peak_in_flight": level.peak_in_flight,
        "retries": level.retries,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| server | N | requests | correct | wrong | errors | lost / twice | req/s | tok/s | p50 s | p90 s | p99 s | "
            "max s | TTFT p50 s | peak in flight | retries | cross-wired |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        lat, ttft = r["latency_s"], r["ttft_s"]
        errors = ", ".join(f"{k} {v}" for k, v in r["errors"].items()) or "0"
        lines.append(f"| {r.get('server', '')} | {r['concurrency']} | {r['requests']} | {r['correct']} | "
                     f"{r['wrong_answers']} | {errors} | "
                     f"{len(r['lost'])} / {len(r['ended_twice'])} | {r['throughput_rps']} | {r['completion_tokens_per_s']} | "
                     f"{lat['p50']} | {lat['p90']} | {lat['p99']} | {lat['max']} | {ttft['p50']} | "
                     f"{r['peak_in_flight']} | {r['retries']} | {len(r['cross_wired'])} |")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    backend = OpenAICompatibleBackend(base_url, model=args.model, api_key=args.api_key, timeout=args.timeout,
                                      token_counting=args.token_counting, max_connections=max(64, max(args.levels) * 2))
    engine = HammerEngine(backend=backend, max_tokens=args.max_tokens)
    # Which async path the engine takes: its native one calls backend.astream, the thread path does not.
    native_calls = 0
    astream = backend.astream

    def counting_astream(*a: Any, **k: Any) -> Any:
        nonlocal native_calls
        native_calls += 1
        return astream(*a, **k)

    backend.astream = counting_astream  # type: ignore[method-assign]
    # Warm-up, not measured: discovery, the grammar probe, and the tools prefix in the server's KV cache
    # (one round of max(N) concurrent requests, so every slot of a multi-slot server holds it).
    await engine.agenerate([Message.user(question(1))], tools=DEMO_TOOLS)
    native = native_calls > 0
    began = time.perf_counter()
    await asyncio.gather(*(engine.agenerate([Message.user(question(2 + i))], tools=DEMO_TOOLS)
                           for i in range(max(args.levels))))
    cold_round = time.perf_counter() - began
    rows = []
    first_id = 100
    for n in args.levels:
        level = await run_level(engine, backend, n, args.duration, args.max_requests, first_id)
        first_id += len(level.issued) + 1000
        rows.append(summarize(level))
        print(f"N={n}: {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
    await backend.aclose()
    return {"rows": rows, "server": backend.info(), "engine_async_path": "native" if native else "worker threads",
            "cold_round_s": round(cold_round, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", help="a running server; default: start each of --servers on loopback")
    parser.add_argument("--model", help="model name on the server (default: the only one it serves)")
    parser.add_argument("--api-key", default=os.environ.get("HAMMER_SERVER_API_KEY"))
    parser.add_argument("--model-path", help="GGUF for the local server (default: the embedded default model)")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--concurrency", default="1,2,4", help="comma-separated session counts")
    parser.add_argument("--servers", default="llama-server,llama-cpp-python",
                        help="without --base-url: the servers started in turn, side by side")
    parser.add_argument("--parallel", type=int, help="llama-server slots (default: the largest session count)")
    parser.add_argument("--threads", type=int, help="CPU threads of each server (default: theirs)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of new requests per level (max 60)")
    parser.add_argument("--max-requests", type=int, default=64, help="request budget per level")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--token-counting", choices=["server", "estimate"], default="server")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    args.levels = [int(n) for n in args.concurrency.split(",") if n.strip()]
    args.duration = min(args.duration, 60.0)

    started = time.perf_counter()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    runs = []
    if args.base_url:
        runs.append(asyncio.run(main_async(args, args.base_url)))
    else:
        from hammer_plugins.launch import LlamaServer
        from hammer_plugins.models.source import default_model_path

        model = args.model_path or default_model_path()
        for kind in args.servers.split(","):
            if kind == "llama-server":
                server: Any = LlamaServer(model, n_ctx=args.n_ctx, parallel=args.parallel or max(args.levels),
                                          n_threads=args.threads)
            elif kind == "llama-cpp-python":
                server = LlamaCppPythonServer(model, n_ctx=args.n_ctx, n_threads=args.threads)
            else:
                raise SystemExit(f"unknown server {kind!r}: use llama-server and/or llama-cpp-python")
            with server:
                runs.append(asyncio.run(main_async(args, server.base_url)))
    for run in runs:
        for row in run["rows"]:
            row["server"] = run["server"]["server_kind"]
    results = {
        "runs": runs, "command": " ".join(sys.argv), "total_wall_s": round(time.perf_counter() - started, 1),
        "load_average_at_start": load, "cpu_count": os.cpu_count(), "platform": platform.platform(),
        "settings": {k: v for k, v in vars(args).items() if k != "api_key"},
    }
    print(table([row for run in runs for row in run["rows"]]))
    for run in runs:
        print(f"\nserver: {run['server']['server_kind']} at {run['server']['base_url']}; engine async path: "
              f"{run['engine_async_path']}; cold warm-up round of {max(args.levels)}: {run['cold_round_s']} s")
    print(f"token counting: {args.token_counting}; load average at start: {load}; total {results['total_wall_s']} s")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
