"""Hammer's OpenAI-compatible server on llama-server, beside llama-server's own ``/v1/chat/completions``.

Both paths serve the same GGUF on the same llama-server build with the same slots; only the front
differs:

* ``hammer``: ``hammer serve --openai --backend llama-server`` in process (create_app over the server
  backend): Hammer's trained prompt, the engine's grammar in llama-server's ``grammar`` field, Hammer's
  parser and refusal mapping;
* ``llama-server --jinja``: the checkpoint's chat template and llama.cpp's own tool-call handling.

For each path and each concurrency level N (default 1, 2, 4) a fresh llama-server is started (so no
prompt stays cached from an earlier run; ``--cache-ram 0``), and the same BFCL questions are sent
by N clients at once through the openai SDK's ``AsyncOpenAI``. Reported per (path, N): requests/s,
p50 / p95 latency, and how many answers bfcl-eval's checker accepts, so that speed is judged beside
correctness. Tool names with dots are sent with underscores (OpenAI's name pattern) and mapped back
before checking, as BFCL's own OpenAI handler does.

Usage::

    .venv/bin/python benchmarks/openai_server_load.py [--per-category 10] [--concurrency 1,2,4]
        [--threads 2] [--out docs/benchmarks/openai-server]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI

from hammer_evals.bfcl.accuracy import load_entries
from hammer_evals.bfcl.bfcl import BfclEntry, score, to_bfcl_output, to_openai_tools
from hammer_plugins import HammerEngine
from hammer_plugins.backends.remote import OpenAICompatibleBackend
from hammer_plugins.http_api import BackgroundServer, create_app
from hammer_plugins.launch import LlamaServer
from hammer_plugins.models.source import default_model_path

CATEGORIES = ("simple_python", "multiple", "parallel", "live_simple", "irrelevance")
PATHS = ("hammer", "llama-server --jinja")
KEY = "bench-key"


async def ask(client: AsyncOpenAI, model: str, entry: BfclEntry, max_tokens: int) -> dict[str, Any]:
    tools, names = to_openai_tools(entry.functions)
    started = time.perf_counter()
    record: dict[str, Any] = {"id": entry.id, "category": entry.category}
    try:
        reply = await client.chat.completions.create(model=model, messages=entry.question, tools=tools,
                                                     max_tokens=max_tokens, temperature=0)
    except Exception as exc:  # noqa: BLE001 - a failed request is recorded, and counted wrong
        record.update(latency_s=time.perf_counter() - started, error=f"{type(exc).__name__}: {exc}"[:300],
                      correct=False, malformed=False, failed=True, calls=[])
        return record
    latency = time.perf_counter() - started
    calls, malformed = [], False
    for call in reply.choices[0].message.tool_calls or []:
        try:
            arguments = json.loads(call.function.arguments)
        except ValueError:
            malformed = True
            continue
        if not isinstance(arguments, dict):
            malformed = True
            continue
        calls.append((names.get(call.function.name, call.function.name), arguments))
    verdict = score(entry, to_bfcl_output(calls))
    record.update(latency_s=latency, correct=verdict.correct, error=verdict.error, malformed=malformed,
                  finish_reason=reply.choices[0].finish_reason, calls=[[n, a] for n, a in calls],
                  prompt_tokens=reply.usage.prompt_tokens if reply.usage else None,
                  completion_tokens=reply.usage.completion_tokens if reply.usage else None)
    return record


async def run_level(base_url: str, model: str, entries: list[BfclEntry], concurrency: int,
                    max_tokens: int) -> tuple[list[dict[str, Any]], float]:
    client = AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=900)
    gate = asyncio.Semaphore(concurrency)
    # Unmeasured: the first request pays for one-off work (the server backend's discovery and grammar probe).
    await client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say hi."}], max_tokens=4)

    async def one(entry: BfclEntry) -> dict[str, Any]:
        async with gate:
            return await ask(client, model, entry, max_tokens)

    started = time.perf_counter()
    records = await asyncio.gather(*(one(e) for e in entries))
    wall = time.perf_counter() - started
    await client.close()
    return list(records), wall


def measure(path: str, gguf: str, entries: list[BfclEntry], concurrency: int, args: argparse.Namespace) -> dict[str, Any]:
    with LlamaServer(gguf, parallel=max(args.levels), n_ctx=args.n_ctx, n_threads=args.threads, model_alias="hammer",
                     api_key=KEY, cache_ram_mib=0, extra_args=("--jinja",), startup_timeout=600) as llama:
        if path == "hammer":
            backend = OpenAICompatibleBackend(llama.base_url, model="hammer", api_key=KEY, timeout=900, trust_env=False)
            app = create_app(HammerEngine(backend=backend), model_name="hammer", api_key=KEY)
            with BackgroundServer(app) as front:
                records, wall = asyncio.run(run_level(front.base_url, "hammer", entries, concurrency, args.max_tokens))
            backend.close()
        else:
            records, wall = asyncio.run(run_level(llama.base_url, "hammer", entries, concurrency, args.max_tokens))
    latencies = sorted(r["latency_s"] for r in records)
    return {"path": path, "concurrency": concurrency, "requests": len(records), "wall_s": round(wall, 2),
            "requests_per_s": round(len(records) / wall, 3),
            "p50_s": round(statistics.median(latencies), 2),
            "p95_s": round(latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))], 2),
            "correct": sum(r["correct"] for r in records), "malformed": sum(r["malformed"] for r in records),
            "failed": sum(r.get("failed", False) for r in records),
            "records": records}


def table(results: list[dict[str, Any]], entries: list[BfclEntry]) -> str:
    per_category = {c: sum(e.category == c for e in entries) for c in CATEGORIES}
    head = ("| front | N | req/s | p50 s | p95 s | correct (BFCL checker) | "
            + " | ".join(per_category) + " | malformed | failed requests |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        by = {c: sum(x["correct"] for x in r["records"] if x["category"] == c) for c in per_category}
        lines.append(f"| {r['path']} | {r['concurrency']} | {r['requests_per_s']} | {r['p50_s']} | {r['p95_s']} | "
                     f"{r['correct']}/{r['requests']} | " + " | ".join(f"{by[c]}/{n}" for c, n in per_category.items())
                     + f" | {r['malformed']} | {r['failed']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-category", type=int, default=10)
    parser.add_argument("--concurrency", default="1,2,4")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-ctx", type=int, default=4096, help="each slot's context window")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--model-path", default=None, help="a GGUF; default: the embedded default model")
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    args.levels = [int(n) for n in args.concurrency.split(",")]
    gguf = args.model_path or str(default_model_path())
    entries, _ = load_entries(CATEGORIES, args.per_category, seed=0)
    started = time.perf_counter()
    results = []
    for level in args.levels:
        for path in args.paths.split(","):
            result = measure(path, gguf, entries, level, args)
            print(f"{path:22s} N={level}: {result['requests_per_s']} req/s, p50 {result['p50_s']} s, "
                  f"p95 {result['p95_s']} s, correct {result['correct']}/{result['requests']}", file=sys.stderr, flush=True)
            results.append(result)
    text = table(results, entries)
    command = "python benchmarks/openai_server_load.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(text)
    print(f"\n{len(entries)} questions; {time.perf_counter() - started:.0f} s in all; command: {command}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "openai_server_load.json").write_text(json.dumps(
            {"command": command, "model": gguf, "machine": {"cpu": platform.processor() or platform.machine(),
                                                           "python": platform.python_version()},
             "slots": max(args.levels), "n_ctx_per_slot": args.n_ctx, "threads": args.threads,
             "results": results}, indent=1) + "\n")
        (args.out / "table.md").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
