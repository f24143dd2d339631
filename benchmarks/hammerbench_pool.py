"""HammerBench's single-turn questions asked with their own tools and with the whole tool set the shipped data holds.

HammerBench gives each question its own few tools; an agent hands the model all of its tools. Each question of
``ST_Perfect`` (the first ``--questions``) is asked twice in the same process, on the same loaded model, with
default engine settings (so the tool selection of large sets is on): with its own tools, then with every distinct
tool of the shipped HammerBench data (632 tools; the full upstream set has 1,063), in one fixed order, its own
among them. Each answer is scored as ``hammer eval hammerbench`` scores a snapshot: the function name, and the
arguments by the official check (no extra key, every label value matched at ROUGE-L >= 0.7). Recorded per
setting: right names, right calls, the median and mean seconds per call, the median prompt tokens, and for the
pool the selector's recall (the label's function among the offered tools, ``HammerResponse.offered_tools``).

``--recall-only`` runs no model: the selector's recall alone for each built-in selector (``meaning``, ``bm25``),
over the first ``--questions`` of them, through the engine's own planning on a scripted backend.

Usage::

    .venv/bin/python benchmarks/hammerbench_pool.py [--questions 40] [--recall-only]
        [--json docs/benchmarks/tools/hammerbench_pool.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evals"))

from record import run_facts, write_record  # noqa: E402

from hammer_evals.datasets import hammerbench_dir  # noqa: E402
from hammer_evals.hammerbench.data import BenchTurn, available_files, load_file, to_bench_tools  # noqa: E402
from hammer_evals.hammerbench.metrics import arguments_correct  # noqa: E402
from hammer_evals.hammerbench.runner import turn_messages  # noqa: E402
from hammer_plugins import HammerEngine  # noqa: E402
from hammer_plugins.values.errors import ContextWindowExceededError  # noqa: E402


def questions(count: int) -> list[BenchTurn]:
    """The first scored snapshot of each of the first ``count`` ST_Perfect records that expects a call."""
    turns = [record.turns[record.scored[0]] for record in load_file(hammerbench_dir(), "ST_Perfect")]
    return [turn for turn in turns if turn.label.expects_call][:count]


def every_tool() -> list[dict[str, Any]]:
    """Every distinct tool (by name) of the shipped data, in the data's order."""
    found: dict[str, dict[str, Any]] = {}
    for stem in available_files(hammerbench_dir()):
        for record in load_file(hammerbench_dir(), stem):
            for turn in record.turns:
                for tool in turn.tools:
                    found.setdefault(tool["name"], tool)
    return list(found.values())


def ask(engine: HammerEngine, turn: BenchTurn, tools: list[dict[str, Any]]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        response = engine.generate(turn_messages(turn), to_bench_tools(tools), "auto", parallel_tool_calls=False)
    except ContextWindowExceededError:
        return {"context_window_exceeded": True, "seconds": time.perf_counter() - started}
    seconds = time.perf_counter() - started
    call = response.tool_calls[0] if response.tool_calls else None
    name_right = call is not None and call.name == turn.label.name
    return {"name_right": name_right, "call_right": name_right and arguments_correct(turn.label.arguments, call.arguments),
            "seconds": seconds, "prompt_tokens": response.usage.prompt_tokens,
            "offered": response.offered_tools, "answered": call.name if call else response.kind}


def summary(rows: list[dict[str, Any]], label_names: list[str | None]) -> dict[str, Any]:
    done = [r for r in rows if not r.get("context_window_exceeded")]
    seconds = [r["seconds"] for r in done]
    out = {"questions": len(rows), "names_right": sum(r["name_right"] for r in done),
           "calls_right": sum(r["call_right"] for r in done),
           "context_window_exceeded": len(rows) - len(done),
           "median_seconds": round(statistics.median(seconds), 3) if seconds else None,
           "mean_seconds": round(statistics.fmean(seconds), 3) if seconds else None,
           "median_prompt_tokens": statistics.median(r["prompt_tokens"] for r in done) if done else None}
    offered = [(r["offered"], name) for r, name in zip(rows, label_names, strict=True) if r.get("offered") is not None]
    if offered:
        out["selector_recall"] = round(sum(name in o for o, name in offered) / len(offered), 3)
        out["median_offered"] = statistics.median(len(o) for o, _ in offered)
    return out


def recall_only(asked: list[BenchTurn], pool: list[dict[str, Any]]) -> dict[str, Any]:
    """The label's function among the offered tools, per built-in selector (no model runs)."""
    from hammer_plugins import ScriptedBackend
    from hammer_plugins.engine.planning import make_plan
    from hammer_plugins.engine.request import EngineRequest

    tools = to_bench_tools(pool)
    found: dict[str, Any] = {}
    for selector in ("meaning", "bm25"):
        engine = HammerEngine(backend=ScriptedBackend([]), tool_selector=selector)
        hits, counts = [], []
        for turn in asked:
            offered = make_plan(engine, EngineRequest.of(turn_messages(turn), tools), fit=False).offered or ()
            hits.append(turn.label.name in offered)
            counts.append(len(offered))
        found[selector] = {"questions": len(asked), "recall": round(sum(hits) / len(hits), 4),
                           "mean_offered": round(statistics.fmean(counts), 2)}
        print(selector, found[selector], flush=True)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--json", type=Path, help="write the record here")
    parser.add_argument("--recall-only", action="store_true", help="the selector's recall alone; no model runs")
    args = parser.parse_args()
    if args.recall_only:
        pool, asked = every_tool(), questions(args.questions)
        write_record(args.json, {**run_facts("benchmarks/hammerbench_pool.py"), "pool_tools": len(pool),
                                 "source": "ST_Perfect, first questions that expect a call",
                                 "recall": recall_only(asked, pool)})
        return 0
    engine = HammerEngine()
    engine.load()
    pool = every_tool()
    asked = questions(args.questions)
    names = [turn.label.name for turn in asked]
    started = time.perf_counter()
    own = [ask(engine, turn, turn.tools) for turn in asked]
    pooled = [ask(engine, turn, pool) for turn in asked]
    record = {**run_facts("benchmarks/hammerbench_pool.py"), "model": engine.backend.model_name,
              "tool_budget": engine.tool_budget, "pool_tools": len(pool),
              "source": "ST_Perfect, first questions that expect a call; the shipped HammerBench data's distinct tools",
              "own_tools": summary(own, names), "pooled": summary(pooled, names),
              "wall_s": round(time.perf_counter() - started, 1),
              "per_question": [{"label": name, "own": o.get("answered"), "pooled": p.get("answered")}
                               for name, o, p in zip(names, own, pooled, strict=True)]}
    print(json.dumps({k: record[k] for k in ("pool_tools", "own_tools", "pooled", "wall_s")}, indent=1))
    write_record(args.json, record)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
