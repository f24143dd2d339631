"""Quick engine figures on one model: load time, per-call latency, and well-formed answers.

Runs a fixed set of questions against the demo tools plus ``examples/tools.json`` with constrained
decoding on and off, and reports:

* model load time (median of ``--loads`` fresh loads),
* per-call latency, cold (prompt evaluated from scratch) and warm (the tools prefix in the KV
  cache), as medians,
* the share of answers that are well-formed (calls that parse and name bound tools, or a clean
  ``[]``), and the share that pick the expected tool.

Usage::

    .venv/bin/python benchmarks/engine_quick.py [--model-path X.gguf] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from hammer_plugins import HammerEngine, Message, to_tools
from hammer_plugins.cli.main import load_tools_file

ROOT = Path(__file__).resolve().parents[1]

# (question, expected tool or None when no tool fits)
QUESTIONS: list[tuple[str, str | None]] = [
    ("What's the weather in Paris?", "get_weather"),
    ("Is it raining in Tokyo right now?", "get_weather"),
    ("How hot is it in Cairo in fahrenheit?", "get_weather"),
    ("Email bob@x.com saying hi", "send_email"),
    ("Send an email to alice@example.org with subject Lunch asking if she is free at noon", "send_email"),
    ("What is 17 * 23?", "calculate"),
    ("Compute (12.5 + 7.5) / 4", "calculate"),
    ("What time is it in UTC+9?", "get_current_time"),
    ("Find flights from CDG to JFK on 2025-03-14", "search_flights"),
    ("Search business class flights for 2 people from LHR to SFO on 2025-06-01", "search_flights"),
    ("Write a poem about the sea", None),
    ("Tell me a joke", None),
    ("Who wrote Hamlet?", None),
    ("Translate 'good morning' into Spanish", None),
]


def measure(engine: HammerEngine, tools: list[Any], constrained: bool) -> dict[str, Any]:
    known = {t.name for t in to_tools(tools)}
    rows = []
    warm: list[float] = []
    # Warm: consecutive questions share the tools block, which stays in the KV cache.
    for question, _ in QUESTIONS:
        started = time.perf_counter()
        engine.generate([Message.user(question)], tools=tools, constrained=constrained)
        warm.append(time.perf_counter() - started)
    for (question, expected), warm_s in zip(QUESTIONS, warm, strict=True):
        engine.backend.llama.reset()  # type: ignore[attr-defined]  # cold: evaluate the whole prompt
        started = time.perf_counter()
        cold = engine.generate([Message.user(question)], tools=tools, constrained=constrained)
        cold_s = time.perf_counter() - started
        well_formed = (cold.kind == "tool_calls" and not cold.invalid_tool_calls
                       and all(c.name in known for c in cold.tool_calls)) or cold.kind == "refusal"
        picked = cold.tool_calls[0].name if cold.tool_calls else None
        rows.append({"question": question, "expected": expected, "kind": cold.kind, "picked": picked,
                     "well_formed": well_formed, "right": picked == expected if expected else cold.kind != "tool_calls",
                     "cold_s": round(cold_s, 3), "warm_s": round(warm_s, 3),
                     "ttft_warm_s": round(cold.timings.time_to_first_token or 0.0, 3),
                     "prompt_tokens": cold.usage.prompt_tokens, "completion_tokens": cold.usage.completion_tokens,
                     "raw": cold.raw[:200]})
    need_tool = [r for r in rows if r["expected"]]
    return {
        "constrained": constrained,
        "well_formed": sum(r["well_formed"] for r in rows) / len(rows),
        "well_formed_when_a_tool_fits": sum(r["well_formed"] and r["kind"] == "tool_calls" for r in need_tool) / len(need_tool),
        "right_tool": sum(r["right"] for r in need_tool) / len(need_tool),
        "refused_when_no_tool_fits": sum(r["right"] for r in rows if not r["expected"]) / (len(rows) - len(need_tool)),
        "median_cold_s": statistics.median(r["cold_s"] for r in rows),
        "median_warm_s": statistics.median(r["warm_s"] for r in rows),
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path")
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    demo, _ = load_tools_file(None)
    extra, _ = load_tools_file(str(ROOT / "examples" / "tools.json"))
    tools = demo + [t for t in extra if t.name not in {d.name for d in demo}]

    loads = []
    for _ in range(args.loads):
        from hammer_plugins.backends.llama_cpp import LlamaCppBackend

        backend = LlamaCppBackend(args.model_path)
        started = time.perf_counter()
        backend.load()
        loads.append(time.perf_counter() - started)
        del backend
    engine = HammerEngine(model_path=args.model_path, max_tokens=256)
    engine.load()
    results = {
        "machine": f"{platform.node()} {platform.machine()} {platform.processor() or ''}".strip(),
        "model": engine.model_name,
        "tools": len(tools),
        "questions": len(QUESTIONS),
        "median_load_s": round(statistics.median(loads), 3),
        "runs": [measure(engine, tools, True), measure(engine, tools, False)],
    }
    print(f"model: {results['model']} | load (median of {args.loads}): {results['median_load_s']} s | "
          f"{len(tools)} tools, {len(QUESTIONS)} questions")
    print("| constrained | well-formed | well-formed calls where a tool fits | right tool | refused when none fits "
          "| median cold call | median warm call |")
    print("|---|---|---|---|---|---|---|")
    for run in results["runs"]:
        print(f"| {'on' if run['constrained'] else 'off'} | {run['well_formed']:.0%} | "
              f"{run['well_formed_when_a_tool_fits']:.0%} | {run['right_tool']:.0%} | "
              f"{run['refused_when_no_tool_fits']:.0%} | {run['median_cold_s']:.2f} s | {run['median_warm_s']:.2f} s |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
