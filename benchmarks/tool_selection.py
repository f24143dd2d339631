"""BFCL questions asked with pooled tool sets (10, 100, 1,000 real BFCL functions) against their own tools alone.

An agent hands the model every tool it has; BFCL gives each question its own one to four. Here each
question is asked twice or more in the same process, on the same loaded model, with default engine
settings: once with its own functions (BFCL's setting), then with a pool that holds its functions
among other real BFCL functions (from simple_python, multiple, parallel, parallel_multiple,
live_simple and live_multiple, distinct by name, seeded). Each answer is scored by bfcl-eval's AST
checker against the question's own functions (a call to any other tool is wrong). Recorded per
setting: right answers, the median and mean seconds per call, calls that failed for the context
window, and the selector's recall (the right function among the tools offered, read from
``HammerResponse.offered_tools``).

Usage::

    .venv/bin/python benchmarks/tool_selection.py [--sizes 10,100,1000] [--simple 24] [--multiple 12]
        [--variant max_tools=4] [--json docs/benchmarks/tools/selection.json]

``--variant NAME=VALUE`` sets one of ``hammer_plugins.tools.meaning``'s constants (``BEST_OF_QUESTION``,
``BEST_OF_PART``, ``MEANING_WEIGHT``, ``MIN_SHARE_OF_BEST``), ``tool_budget`` or ``tool_selector`` (``bm25``) for
the pooled runs, to compare settings side by side (repeatable: each variant is its own pooled run).
``--parallel-multiple N`` adds questions whose answer calls two to four different functions.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evals"))

from record import run_facts, write_record  # noqa: E402

from hammer_evals.bfcl.bfcl import BfclEntry, load_category, score, to_bfcl_output, to_tool_spec  # noqa: E402
from hammer_plugins import HammerEngine, Message  # noqa: E402
from hammer_plugins.tools import meaning  # noqa: E402
from hammer_plugins.tools.meaning import as_selector  # noqa: E402
from hammer_plugins.values.errors import ContextWindowExceededError  # noqa: E402

POOL_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple")
SETTABLE = ("BEST_OF_QUESTION", "BEST_OF_PART", "MEANING_WEIGHT", "MIN_SHARE_OF_BEST")


def questions(simple: int, multiple: int, parallel_multiple: int = 0) -> list[BfclEntry]:
    chosen = load_category("simple_python", simple, seed=1)[0] + load_category("multiple", multiple, seed=1)[0]
    return chosen + (load_category("parallel_multiple", parallel_multiple, seed=1)[0] if parallel_multiple else [])


def all_functions() -> dict[str, dict[str, Any]]:
    """Every distinct BFCL function of the pool categories, by name (the first description of a name)."""
    found: dict[str, dict[str, Any]] = {}
    for category in POOL_CATEGORIES:
        for entry in load_category(category)[0]:
            for function in entry.functions:
                found.setdefault(function["name"], function)
    return found


def pool_for(entry: BfclEntry, others: list[dict[str, Any]], size: int, seed: int) -> list[dict[str, Any]]:
    """``size`` functions: the question's own, then others drawn (seeded), in a shuffled order."""
    own = {f["name"] for f in entry.functions}
    rng = random.Random(f"{seed}:{entry.id}:{size}")
    rest = [f for f in others if f["name"] not in own]
    pool = list(entry.functions) + rng.sample(rest, max(0, size - len(entry.functions)))
    rng.shuffle(pool)
    return pool


def ask(engine: HammerEngine, entry: BfclEntry, functions: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    engine.backend.llama.reset()  # type: ignore[attr-defined]
    messages = [Message(role=m["role"], content=m["content"]) for m in entry.question]
    tools = [to_tool_spec(f) for f in functions]
    right = {next(iter(g)) for g in entry.ground_truth}
    engine.tool_selector = as_selector(options.pop("tool_selector", "meaning"))
    started = time.perf_counter()
    try:
        response = engine.generate(messages, tools, **options)
    except ContextWindowExceededError as exc:
        return {"id": entry.id, "correct": False, "context_error": True, "seconds": time.perf_counter() - started,
                "prompt_tokens": exc.prompt_tokens}
    seconds = time.perf_counter() - started
    output = to_bfcl_output([(c.name, c.arguments) for c in response.tool_calls])
    verdict = score(entry, output)
    offered = response.offered_tools
    return {"id": entry.id, "correct": verdict.correct, "context_error": False, "seconds": seconds,
            "prompt_tokens": response.usage.prompt_tokens, "calls": [c.name for c in response.tool_calls],
            "offered": None if offered is None else len(offered),
            "recall": None if offered is None else right <= set(offered)}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = [r["seconds"] for r in rows if not r["context_error"]]
    recall = [r["recall"] for r in rows if r.get("recall") is not None]
    offered = [r["offered"] for r in rows if r.get("offered") is not None]
    return {"questions": len(rows), "correct": sum(r["correct"] for r in rows),
            "context_errors": sum(r["context_error"] for r in rows),
            "median_s": statistics.median(seconds) if seconds else None,
            "mean_s": statistics.fmean(seconds) if seconds else None,
            "median_prompt_tokens": statistics.median(r["prompt_tokens"] for r in rows),
            "selector_recall": (sum(recall) / len(recall)) if recall else None,
            "narrowed": len(recall), "median_offered": statistics.median(offered) if offered else None}


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    name, _, value = text.partition("=")
    if name == "tool_selector":
        return text, {name: value}
    number = float(value) if "." in value else int(value)
    return text, {name: number}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--simple", type=int, default=24)
    parser.add_argument("--multiple", type=int, default=12)
    parser.add_argument("--parallel-multiple", type=int, default=0)
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    entries = questions(args.simple, args.multiple, args.parallel_multiple)
    functions = all_functions()
    others = list(functions.values())
    # Each call starts from the same cold context (no prefix kept from the call before, none on disk), so
    # no setting gains from the order the settings run in: the time is a first call's for every one.
    engine = HammerEngine(prefix_cache=False).load()
    engine.generate([Message.user("warm up")], [to_tool_spec(entries[0].functions[0])])
    defaults = {name: getattr(meaning, name) for name in SETTABLE}
    variants = [parse_variant(v) for v in args.variant] or [("default", {})]
    results: dict[str, Any] = {}
    rows: dict[str, list[dict[str, Any]]] = {"own": []}
    for entry in entries:
        row = ask(engine, entry, entry.functions)
        rows["own"].append(row)
        for size in map(int, args.sizes.split(",")):
            pool = pool_for(entry, others, size, seed=0)
            for label, settings in variants:
                options: dict[str, Any] = {}
                for name, value in settings.items():
                    if name in ("tool_budget", "tool_selector"):
                        options[name] = value
                    else:
                        setattr(meaning, name.upper(), value)
                key = f"pool{size}" + ("" if label == "default" else f" {label}")
                rows.setdefault(key, []).append({**ask(engine, entry, pool, **options), "size": size})
                for name, value in defaults.items():
                    setattr(meaning, name, value)
        print(entry.id, json.dumps({k: (v[-1]["correct"], round(v[-1]["seconds"], 2)) for k, v in rows.items()}),
              flush=True)
    own = summary(rows["own"])
    for key, mine in rows.items():
        results[key] = summary(mine)
        if key != "own" and own["median_s"] and results[key]["median_s"]:
            results[key]["median_over_own"] = results[key]["median_s"] / own["median_s"]
        print(f"{key:28s} {json.dumps(results[key])}")
    by_kind = {}
    for key, mine in rows.items():
        for kind, ids in (("single", [e.id for e in entries if len(e.ground_truth) == 1]),
                          ("multi", [e.id for e in entries if len(e.ground_truth) > 1])):
            chosen = [r for r in mine if r["id"] in ids]
            if chosen:
                by_kind[f"{key} {kind}"] = summary(chosen)
                print(f"{key + ' ' + kind:28s} {json.dumps(by_kind[key + ' ' + kind])}")
    write_record(args.json, {**run_facts("benchmarks/tool_selection.py"), "model": engine.model_name, "by_kind": by_kind,
                             "pool_functions": len(functions), "defaults": {**defaults, "tool_budget": engine.tool_budget},
                             "summary": results, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
