"""A repeated tool set: what converting it costs per request, with the conversion cache and without it.

An agent sends the same tools with every request. The server's door validates them (``to_tools``) and the
engine binds them (``engine.bind``); before the conversion cache both converted the whole set on every
request. This times that path per request on HammerBench's own tools (10, 100, and all 632 distinct ones the
package ships), side by
side in one run: "cold" clears the cache before each step (every request converts, twice: as before), "warm"
keeps it (a repeated set is converted once). Each request gets a fresh copy of the tools, as a parsed JSON
body would. No model runs (a scripted backend).

    .venv/bin/python benchmarks/tool_conversion.py --repeats 20 --output docs/benchmarks/tools/conversion.json
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
import time
from pathlib import Path

from hammer_evals.datasets import hammerbench_dir
from hammer_evals.hammerbench.data import available_files, fix_tool_schema, load_file
from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.tools import definition


def hammerbench_tools(limit: int) -> list[dict]:
    """Distinct HammerBench tools (by name), as OpenAI tool dicts."""
    seen: dict[str, dict] = {}
    data = hammerbench_dir()
    for stem in available_files(data):
        for record in load_file(data, stem):
            for turn in record.turns:
                for tool in turn.tools:
                    seen.setdefault(tool["name"], {"type": "function", "function": fix_tool_schema(tool)})
                    if len(seen) >= limit:
                        return list(seen.values())
    return list(seen.values())


def per_request(engine: HammerEngine, tools: list[dict], repeats: int, cold: bool) -> list[float]:
    seconds = []
    for _ in range(repeats):
        body = copy.deepcopy(tools)  # what a parsed request body holds
        if cold:
            definition._CONVERTED.clear()  # noqa: SLF001 (as before the cache: every request converts)
            engine._bindings.clear()  # noqa: SLF001
        started = time.perf_counter()
        definition.to_tools(body)  # the door's validation
        engine.bind(body)  # the engine's binding
        seconds.append(time.perf_counter() - started)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,all", help="tool counts; all: every distinct shipped tool")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--output", default=None, help="write the record here (JSON)")
    args = parser.parse_args()
    pool = hammerbench_tools(10**6)
    sizes = [len(pool) if s == "all" else int(s) for s in args.sizes.split(",")]
    rows = []
    for size in sizes:
        tools = pool[:size]
        engine = HammerEngine(backend=ScriptedBackend(["[]"]))
        cold = per_request(engine, tools, args.repeats, cold=True)
        warm = per_request(engine, tools, args.repeats, cold=False)[1:]  # the first fills the cache
        row = {"tools": len(tools), "body_kB": round(len(json.dumps(tools)) / 1000, 1),
               "cold_ms_median": round(statistics.median(cold) * 1000, 2),
               "warm_ms_median": round(statistics.median(warm) * 1000, 2)}
        row["cold_over_warm"] = round(row["cold_ms_median"] / max(row["warm_ms_median"], 1e-6), 1)
        rows.append(row)
        print(json.dumps(row))
    if args.output:
        record = {"benchmark": "benchmarks/tool_conversion.py", "command": " ".join(
            ["benchmarks/tool_conversion.py", "--sizes", args.sizes, "--repeats", str(args.repeats)]),
            "machine": f"{platform.machine()}, {platform.python_version()}", "rows": rows}
        Path(args.output).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
