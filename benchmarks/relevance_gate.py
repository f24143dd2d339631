"""The relevance gate's effect on BFCL: how often it refuses, and what that does to the model's right answers.

The gate (``HammerEngine(relevance_gate=True)``) answers Hammer's refusal without running the model when no tool
shares a word with the question (the tool ranking's scores are all zero). Two parts, each question with its own
functions (BFCL's setting, every tool offered):

* **every question, no model**: the share the gate refuses, per category: relevant ones (where a refusal is
  wrong) and irrelevance ones (where it is right);
* **the model, gate off and on**: ``--sample`` questions of simple_python, multiple, irrelevance and
  live_irrelevance each (seeded), answered by the default model and scored by bfcl-eval's checker (BFCL's
  relevance rule for the irrelevance categories).

Usage::

    .venv/bin/python benchmarks/relevance_gate.py [--sample 16] [--json docs/benchmarks/tools/relevance_gate.json]
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

from hammer_evals.bfcl.bfcl import BfclEntry, load_category, score, to_bfcl_output, to_tool_spec  # noqa: E402
from hammer_plugins import HammerEngine, Message  # noqa: E402
from hammer_plugins.engine.tool_selection import matches_nothing  # noqa: E402

RELEVANT = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple")
IRRELEVANT = ("irrelevance", "live_irrelevance")


def messages(entry: BfclEntry) -> list[Message]:
    return [Message(role=m["role"], content=m["content"]) for m in entry.question]


def gate_shares(engine: HammerEngine) -> dict[str, Any]:
    out = {}
    for category in (*RELEVANT, *IRRELEVANT):
        entries = [e for e in load_category(category)[0] if e.functions]
        refused = sum(matches_nothing(engine.bind([to_tool_spec(f) for f in e.functions]), messages(e)) for e in entries)
        out[category] = {"questions": len(entries), "refused": refused, "share": round(refused / len(entries), 4)}
    return out


def answers(engine: HammerEngine, entries: list[BfclEntry]) -> dict[str, Any]:
    rows = []
    for entry in entries:
        engine.backend.llama.reset()  # type: ignore[attr-defined]  # each call from a cold context
        started = time.perf_counter()
        response = engine.generate(messages(entry), [to_tool_spec(f) for f in entry.functions])
        output = to_bfcl_output([(c.name, c.arguments) for c in response.tool_calls])
        rows.append({"id": entry.id, "category": entry.category, "correct": score(entry, output).correct,
                     "gated": response.decoding.relevance_gated, "seconds": time.perf_counter() - started})
    summary: dict[str, Any] = {}
    for category in dict.fromkeys(r["category"] for r in rows):
        mine = [r for r in rows if r["category"] == category]
        summary[category] = {"questions": len(mine), "correct": sum(r["correct"] for r in mine),
                             "gated": sum(r["gated"] for r in mine),
                             "median_s": round(statistics.median(r["seconds"] for r in mine), 3)}
    return {"summary": summary, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=16)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    off = HammerEngine(tool_budget=0, prefix_cache=False).load()
    on = HammerEngine(tool_budget=0, prefix_cache=False, relevance_gate=True).load()
    shares = gate_shares(off)
    for category, row in shares.items():
        print(f"{category:18s} the gate refuses {row['refused']:4d} of {row['questions']:4d} ({row['share']:.1%})")
    entries = [e for c in ("simple_python", "multiple", *IRRELEVANT) for e in load_category(c, args.sample, seed=2)[0]
               if e.functions]
    model = {"gate off": answers(off, entries), "gate on": answers(on, entries)}
    for label, result in model.items():
        print(label, json.dumps(result["summary"]))
    write_record(args.json, {**run_facts("benchmarks/relevance_gate.py"), "model": off.model_name,
                             "gate_shares": shares, "model_answers": model})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
