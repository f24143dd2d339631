"""What the ask-or-call rule costs a model that answers right: the answer keys themselves, through the rule.

The rule (``on_missing="ask"``) holds a call back when a required value was not given by anybody. Measured on
the stand-in, it cost 1 right call of 100 on HammerBench's ST_Perfect, but the stand-in gets only a third of
those right: a model that answers more questions right has more right answers to lose. This script asks what
the rule does to the *right* answers: each question's answer-key call is scripted as the model's answer and
goes through the engine's own pipeline (every tool offered, as the evaluators do), with the rule off and on,
and the outcome is scored by the benchmark's own checker:

- BFCL v4, the categories where every value is in the question (simple_python, multiple, parallel,
  parallel_multiple, live_simple, live_multiple, live_parallel_multiple), scored by bfcl-eval's AST checker.
  BFCL accepts several values for a parameter; the answer uses, for each, the first accepted value written
  in the question (case-insensitive), else the first accepted value, and leaves out a parameter whose accepted
  values include "" (optional) when no other value is written in the question.
- HammerBench's ST_Perfect and ST_External (each label's call), English and, given ``--zh``, Chinese, scored by
  the project's copy of the official metric (a call right when its name and every value match).

With the rule off nearly every answer scores right (the ones that do not are listed: a value this script
chose, or BFCL's own answer-key oddities); a point is one question in a hundred. With it on, a right answer is lost
when the rule holds it back (it asks instead) or drops a value the checker needed. No model runs.

Usage::

    PYTHONPATH=.:evals .venv/bin/python benchmarks/ask_or_call_gold.py [--zh /path/to/HammerBench/data/zh] \\
        [--json docs/benchmarks/ask-or-call/gold.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evals"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from record import run_facts, write_record  # noqa: E402

from hammer_evals.bfcl.bfcl import BfclEntry, load_category, score, to_bfcl_output, to_tool_spec  # noqa: E402
from hammer_evals.datasets import hammerbench_dir  # noqa: E402
from hammer_evals.hammerbench.data import load_file  # noqa: E402
from hammer_evals.hammerbench.metrics import arguments_correct  # noqa: E402
from hammer_evals.hammerbench.runner import predict_turn  # noqa: E402
from hammer_plugins import HammerEngine, Message, ScriptedBackend  # noqa: E402

BFCL = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple",
        "live_parallel_multiple")
HAMMERBENCH = ("ST_Perfect", "ST_External")


def _written(value: Any, text: str) -> bool:
    return str(value).lower() in text.lower() if not isinstance(value, (dict, list)) else False


def bfcl_answer(entry: BfclEntry) -> list[dict[str, Any]]:
    """The answer key as calls: for each parameter, an accepted value the question writes, else the first."""
    text = " ".join(str(m.get("content") or "") for m in entry.question)
    calls = []
    for expected in entry.ground_truth:
        name, accepted = next(iter(expected.items()))
        arguments = {}
        for key, values in accepted.items():
            written = [v for v in values if v != "" and _written(v, text)]
            if written:
                arguments[key] = written[0]
            elif "" not in values:
                arguments[key] = values[0]
        calls.append({"name": name, "arguments": arguments})
    return calls


def through_rule(messages: list[Message], tools: list[dict[str, Any]], answer: list[dict[str, Any]],
                 on_missing: str) -> tuple[list[tuple[str, dict[str, Any]]], int]:
    engine = HammerEngine(backend=ScriptedBackend([json.dumps(answer, ensure_ascii=False)]), tool_budget=0,
                          on_missing=on_missing)  # type: ignore[arg-type]
    response = engine.generate(messages, tools)
    return [(c.name, dict(c.arguments)) for c in response.tool_calls], len(response.pending_calls)


def bfcl_rows() -> list[dict[str, Any]]:
    rows = []
    for category in BFCL:
        for entry in load_category(category)[0]:
            messages = [Message(role=m["role"], content=m["content"]) for m in entry.question]
            tools = [to_tool_spec(f) for f in entry.functions]
            answer = bfcl_answer(entry)
            row: dict[str, Any] = {"benchmark": "bfcl", "category": category, "id": entry.id}
            for on_missing in ("call", "ask"):
                calls, held = through_rule(messages, tools, answer, on_missing)
                row[on_missing] = score(entry, to_bfcl_output(calls)).correct
                row[f"{on_missing}_held"] = held
            if row["call"] and not row["ask"]:
                row["lost"] = answer
            rows.append(row)
    return rows


def hammerbench_rows(data: Path, language: str) -> list[dict[str, Any]]:
    rows = []
    for stem in HAMMERBENCH:
        for record in load_file(data, stem):
            turn = record.turns[0]
            label = turn.label
            if not label.expects_call:
                continue
            answer = [{"name": label.name, "arguments": dict(label.arguments)}]
            row: dict[str, Any] = {"benchmark": f"hammerbench-{language}", "category": stem,
                                   "id": f"{stem}:{record.index}"}
            for on_missing in ("call", "ask"):
                # The evaluator's own pipeline (hammer eval hammerbench), the label's call as the model's answer.
                engine = HammerEngine(backend=ScriptedBackend([json.dumps(answer, ensure_ascii=False)]),
                                      on_missing=on_missing)  # type: ignore[arg-type]
                predicted = predict_turn(engine, turn)
                call = predicted.call or {}
                row[on_missing] = call.get("name") == label.name and arguments_correct(
                    label.arguments, call.get("arguments"), language)  # type: ignore[arg-type]
                row[f"{on_missing}_held"] = int(predicted.asked)
            if row["call"] and not row["ask"]:
                row["lost"] = answer
            rows.append(row)
    return rows


def table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["benchmark"], row["category"]), []).append(row)
    out = []
    for (benchmark, category), group in groups.items():
        right_off = sum(r["call"] for r in group)
        right_on = sum(r["ask"] for r in group)
        lost = [r for r in group if "lost" in r]
        out.append({"benchmark": benchmark, "category": category, "questions": len(group), "right_off": right_off,
                    "right_on": right_on, "held": sum(r["ask_held"] > 0 for r in group),
                    "lost_held": sum(r["ask_held"] > 0 for r in lost),
                    "lost_value_dropped": sum(r["ask_held"] == 0 for r in lost),
                    "points_lost": round(100 * (right_off - right_on) / len(group), 2)})
    return out


def examples(rows: list[dict[str, Any]], each: int = 5) -> list[dict[str, Any]]:
    """The first lost answers of each category: what the rule holds back or drops."""
    kept: dict[tuple[str, str], int] = {}
    out = []
    for row in rows:
        key = (row["benchmark"], row["category"])
        if "lost" in row and kept.get(key, 0) < each:
            kept[key] = kept.get(key, 0) + 1
            out.append({"id": row["id"], "held": row["ask_held"] > 0, "answer": row["lost"]})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--zh", type=Path, help="the folder of HammerBench's Chinese files (its data/zh)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = bfcl_rows() + hammerbench_rows(hammerbench_dir(), "en")
    if args.zh:
        rows += hammerbench_rows(args.zh, "zh")
    summary = table(rows)
    for line in summary:
        print(f"{line['benchmark']:16} {line['category']:24} {line['questions']:5} right off {line['right_off']:5} "
              f"on {line['right_on']:5}  held {line['held']:4} (lost {line['lost_held']} held, "
              f"{line['lost_value_dropped']} by a dropped value)  lost {line['points_lost']:6.2f} points")
    if args.json:
        write_record(args.json, {"facts": run_facts("benchmarks/ask_or_call_gold.py"), "summary": summary,
                                 "lost_examples": examples(rows),
                                 "lost_ids": [r["id"] for r in rows if "lost" in r],
                                 "not_right_off": [r["id"] for r in rows if not r["call"]]})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
