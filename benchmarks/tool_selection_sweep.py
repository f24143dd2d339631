"""The sweep behind the meaning selector's weights, on the TUNE halves only (no model runs).

For each setting of ``hammer_plugins.tools.meaning``'s ``MEANING_WEIGHT`` and ``STRONG_MATCH`` (``0``: BM25 scaled
by min-max instead), the share of questions whose needed functions are all among the 4 best-scored tools of the
whole question: BFCL v4 questions of the seven categories among 1,000 pooled functions (the ``tune`` half of
``benchmarks/tool_selection_recall.py``'s sample), and the ``tune`` half of the paraphrase and multilingual set
among every pooled function. The held-out halves are not read here.

Usage::

    .venv/bin/python benchmarks/tool_selection_sweep.py [--per-category 60]
        [--json docs/benchmarks/tools/selection_sweep_weights.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evals"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from record import run_facts, write_record  # noqa: E402
from tool_selection_recall import CATEGORIES, DATA, every_function, half  # noqa: E402

from hammer_evals.bfcl.bfcl import load_category, to_tool_spec  # noqa: E402
from hammer_plugins.tools import meaning, to_tool  # noqa: E402
from hammer_plugins.tools.meaning import MeaningSelector  # noqa: E402

SETTINGS = [(0.5, 0.0), (0.6, 0.0), (0.7, 0.0), (0.8, 0.0), (0.5, 5.0), (0.5, 10.0), (0.6, 10.0), (0.7, 10.0),
            (0.5, 20.0)]
TOP = 4


def scaled_min_max(selector: MeaningSelector, text: str, tools: list[Any]) -> np.ndarray:
    """The fused score with BM25 scaled by min-max (the setting ``STRONG_MATCH`` 0 stands for)."""
    index = selector._index(tools)
    assert selector._vectors is not None
    sense = index.matrix @ selector._vectors.embedder.query(text)
    words = np.asarray(index.lexical.scores(text), dtype=np.float32)
    low, high = float(words.min()), float(words.max())
    words = (words - low) / (high - low) if high > low else np.zeros_like(words)
    return meaning.MEANING_WEIGHT * meaning._scaled(sense) + (1 - meaning.MEANING_WEIGHT) * words


def top(selector: MeaningSelector, text: str, tools: list[Any], strong: float) -> set[str]:
    scores = scaled_min_max(selector, text, tools) if strong == 0 else selector.scores(text, tools)
    return {tools[i].name for i in np.argsort(-scores, kind="stable")[:TOP]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-category", type=int, default=60)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    functions = every_function()
    names = list(functions)
    selector = MeaningSelector()
    bfcl: list[tuple[str, set[str], list[Any]]] = []
    for category in CATEGORIES:
        for entry in load_category(category, args.per_category, seed=7)[0]:
            if half(entry.id) != "tune":
                continue
            own = list(dict.fromkeys(f["name"] for f in entry.functions))
            rng = random.Random(f"0:{entry.id}:1000")
            pool = own + rng.sample([n for n in names if n not in set(own)], 1000 - len(own))
            rng.shuffle(pool)
            text = "\n".join(m["content"] for m in entry.question if m["role"] == "user")
            bfcl.append((text, {next(iter(g)) for g in entry.ground_truth}, [to_tool(to_tool_spec(functions[n]))
                                                                              for n in pool]))
    everything = [to_tool(to_tool_spec(f)) for f in functions.values()]
    paraphrases = [q for q in json.loads(DATA.read_text(encoding="utf-8"))["questions"] if q["split"] == "tune"]
    results = []
    for weight, strong in SETTINGS:
        meaning.MEANING_WEIGHT, meaning.STRONG_MATCH = weight, strong or meaning.STRONG_MATCH
        served = sum(needed <= top(selector, text, tools, strong) for text, needed, tools in bfcl)
        fitting = sum(bool(set(q["fits"]) & top(selector, q["question"], everything, strong)) for q in paraphrases)
        row = {"meaning_weight": weight, "strong_match": strong or None, "bfcl_tune": round(served / len(bfcl), 4),
               "paraphrase_tune": round(fitting / len(paraphrases), 4)}
        results.append(row)
        print(json.dumps(row), flush=True)
    write_record(args.json, {**run_facts("benchmarks/tool_selection_sweep.py"), "top": TOP,
                             "bfcl_tune_questions": len(bfcl), "paraphrase_tune_questions": len(paraphrases),
                             "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
