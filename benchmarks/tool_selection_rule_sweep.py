"""What limits tool selection's recall among 1,000 functions: the count rule or the tool budget? No model run.

The default selector (``meaning``) offers the whole question's best tool, the best of each part, and the next of the
question's best ``BEST_OF_QUESTION`` that score at least ``MIN_SHARE_OF_BEST`` of the best; the engine then keeps
what fits ``tool_budget`` (estimated prompt tokens of the tools block). This sweeps those three (and
``BEST_OF_PART``) on BFCL v4's questions among 1,000 pooled functions and on the paraphrase set, for one half of
the questions (``--half``; the halves are those of benchmarks/tool_selection_recall.py), and records recall (every
needed function offered) and the tools offered per call. Recall is what an offer allows, not what the model
answers: a larger offer costs prompt time and, on a small model, right calls (docs/tools.md).

Usage::

    .venv/bin/python benchmarks/tool_selection_rule_sweep.py --half tune [--budgets 1024,1536,2048]
        [--rules 4:0.7:1,6:0.6:1,8:0.5:1] [--json docs/benchmarks/tools/selection_rule_sweep.json]

A rule is ``BEST_OF_QUESTION:MIN_SHARE_OF_BEST:BEST_OF_PART``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evals"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from record import run_facts, write_record  # noqa: E402
from tool_selection_recall import CATEGORIES, DATA, every_function, half, offered  # noqa: E402

from hammer_evals.bfcl.bfcl import load_category, to_tool_spec  # noqa: E402
from hammer_plugins import HammerEngine, Message, ScriptedBackend  # noqa: E402
from hammer_plugins.tools import meaning  # noqa: E402

POOL = 1000


def cases(functions: dict[str, dict[str, Any]], which: str, per_category: int) -> list[tuple[str, list[Message],
                                                                                              list[dict[str, Any]],
                                                                                              set[str]]]:
    """BFCL questions of one half, each with its own functions among ``POOL`` pooled ones (as the recall bench)."""
    names = list(functions)
    out = []
    for category in CATEGORIES:
        for entry in load_category(category, per_category, seed=7)[0]:
            if half(entry.id) != which:
                continue
            needed = {next(iter(g)) for g in entry.ground_truth}
            own = list(dict.fromkeys(f["name"] for f in entry.functions))
            rng = random.Random(f"0:{entry.id}:{POOL}")
            rest = [n for n in names if n not in set(own)]
            pool = own + rng.sample(rest, POOL - len(own))
            rng.shuffle(pool)
            messages = [Message(role=m["role"], content=m["content"]) for m in entry.question]
            out.append((category, messages, [to_tool_spec(functions[n]) for n in pool], needed))
    return out


def measure(engine: HammerEngine, bfcl: list[Any], paraphrases: list[dict[str, Any]],
            every_tool: list[dict[str, Any]]) -> dict[str, Any]:
    served: dict[str, list[bool]] = {}
    counts = []
    for category, messages, tools, needed in bfcl:
        got = offered(engine, messages, tools)
        served.setdefault(category, []).append(needed <= set(got))
        counts.append(len(got))
    fitting = [bool(set(q["fits"]) & set(offered(engine, [Message.user(q["question"])], every_tool)))
               for q in paraphrases]
    every = [s for values in served.values() for s in values]
    return {"bfcl_served": round(sum(every) / len(every), 4), "bfcl_questions": len(every),
            "mean_offered": round(statistics.fmean(counts), 2),
            "paraphrase_served": round(sum(fitting) / len(fitting), 4), "paraphrase_questions": len(fitting),
            "per_category": {c: round(sum(v) / len(v), 4) for c, v in served.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=("tune", "held_out"), default="tune")
    parser.add_argument("--per-category", type=int, default=60)
    parser.add_argument("--budgets", default="1024,1536,2048")
    parser.add_argument("--rules", default="4:0.7:1,6:0.6:1,8:0.5:1,8:0.0:1")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    functions = every_function()
    bfcl = cases(functions, args.half, args.per_category)
    paraphrases = [q for q in json.loads(DATA.read_text(encoding="utf-8"))["questions"] if q["split"] == args.half]
    every_tool = [to_tool_spec(f) for f in functions.values()]
    defaults = (meaning.BEST_OF_QUESTION, meaning.MIN_SHARE_OF_BEST, meaning.BEST_OF_PART)
    results = []
    try:
        for budget in (int(b) for b in args.budgets.split(",")):
            engine = HammerEngine(backend=ScriptedBackend([]), tool_budget=budget)
            for rule in args.rules.split(","):
                best_of_question, share_of_best, best_of_part = rule.split(":")
                meaning.BEST_OF_QUESTION, meaning.MIN_SHARE_OF_BEST = int(best_of_question), float(share_of_best)
                meaning.BEST_OF_PART = int(best_of_part)
                row = {"tool_budget": budget, "best_of_question": int(best_of_question),
                       "min_share_of_best": float(share_of_best), "best_of_part": int(best_of_part),
                       **measure(engine, bfcl, paraphrases, every_tool)}
                print(json.dumps({k: v for k, v in row.items() if k != "per_category"}), flush=True)
                results.append(row)
    finally:
        meaning.BEST_OF_QUESTION, meaning.MIN_SHARE_OF_BEST, meaning.BEST_OF_PART = defaults
    write_record(args.json, {**run_facts("benchmarks/tool_selection_rule_sweep.py"), "half": args.half,
                             "pool_functions": POOL, "per_category": args.per_category,
                             "defaults": {"tool_budget": HammerEngine(backend=ScriptedBackend([])).tool_budget,
                                          "best_of_question": defaults[0], "min_share_of_best": defaults[1],
                                          "best_of_part": defaults[2]},
                             "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
