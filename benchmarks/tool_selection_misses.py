"""Why a question's tools were not all offered: the tune half's misses among 1,000 pooled BFCL functions, one by one.

For each question of the chosen categories whose every needed function is not offered (the same pool, seed and
selection as ``tool_selection_recall.py``), it prints the question, the rank of each needed function in the meaning
selector's ranking of the whole question, what was offered, and each part of the question with the tool that
part's ranking put first. Only the ``tune`` half is read: the ``held_out`` half stays unseen while the selector is
tuned (``--half held_out`` exists for the final report, not for tuning).

Usage::

    .venv/bin/python benchmarks/tool_selection_misses.py [--category parallel_multiple ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evals"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from record import run_facts, write_record  # noqa: E402
from tool_selection_recall import every_function, half  # noqa: E402

from hammer_evals.bfcl.bfcl import load_category, to_tool_spec  # noqa: E402
from hammer_plugins import HammerEngine, Message, ScriptedBackend  # noqa: E402
from hammer_plugins.engine.planning import make_plan  # noqa: E402
from hammer_plugins.engine.request import EngineRequest  # noqa: E402
from hammer_plugins.tools import to_tool  # noqa: E402
from hammer_plugins.tools.meaning import MeaningSelector, question_parts  # noqa: E402

POOL = 1000


def misses(category: str, part_of_set: str, per_category: int, functions: dict[str, dict[str, Any]],
           engine: HammerEngine, selector: MeaningSelector) -> tuple[int, list[dict[str, Any]]]:
    """How many questions of ``category``'s half were read, and the misses among them."""
    names = list(functions)
    read, found = 0, []
    for entry in load_category(category, per_category, seed=7)[0]:
        if half(entry.id) != part_of_set:
            continue
        read += 1
        needed = {next(iter(g)) for g in entry.ground_truth}
        own = list(dict.fromkeys(f["name"] for f in entry.functions))
        rng = random.Random(f"0:{entry.id}:{POOL}")  # the pool tool_selection_recall.py draws
        pool = own + rng.sample([n for n in names if n not in set(own)], POOL - len(own))
        rng.shuffle(pool)
        specs = [to_tool_spec(functions[n]) for n in pool]
        messages = [Message(role=m["role"], content=m["content"]) for m in entry.question]
        plan = make_plan(engine, EngineRequest.of(messages, specs), fit=False)
        offered = sorted(plan.offered or ())
        if needed <= set(offered):
            continue
        tools = [to_tool(s) for s in specs]
        text = messages[-1].content
        order = np.argsort(-selector.scores(text, tools), kind="stable").tolist()
        rank = {pool[i]: r for r, i in enumerate(order)}
        parts = [(part, pool[int(np.argmax(selector.scores(part, tools)))]) for part in question_parts(text)]
        found.append({"id": entry.id, "question": text, "needed": [{"function": n, "rank": rank.get(n)} for n in sorted(needed)],
                      "offered": offered, "parts": [{"part": p, "best": b, "needed": b in needed} for p, b in parts]})
    return read, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--category", action="append", help="default: parallel_multiple and live_parallel_multiple")
    parser.add_argument("--half", choices=("tune", "held_out"), default="tune")
    parser.add_argument("--per-category", type=int, default=60)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    summary, rows = {}, []
    functions, engine, selector = every_function(), HammerEngine(backend=ScriptedBackend([])), MeaningSelector()
    for category in args.category or ["parallel_multiple", "live_parallel_multiple"]:
        read, found = misses(category, args.half, args.per_category, functions, engine, selector)
        summary[category] = {"questions": read, "served": read - len(found), "missed": len(found)}
        for miss in found:
            print(f"--- {miss['id']}: {miss['question'][:300]!r}")
            ranks = {n["function"]: n["rank"] for n in miss["needed"]}
            print(f"    needed ranks {ranks}; offered {miss['offered']}")
            for part in miss["parts"] or [{"part": "(no parts)", "best": "", "needed": False}]:
                print(f"    part {part['part'][:80]!r} -> {part['best']}{' (needed)' if part['needed'] else ''}")
        print(f"{category} ({args.half}): {read - len(found)} of {read} served", flush=True)
        rows += [{"category": category, **miss} for miss in found]
    if args.json:
        write_record(args.json, {**run_facts("benchmarks/tool_selection_misses.py"), "pool_functions": POOL, "half": args.half,
                                 "summary": summary, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
