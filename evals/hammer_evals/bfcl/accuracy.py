"""BFCL accuracy of several runners on the same questions, one model, one process.

Example:
    >>> summarize([{"runner": "r", "category": "irrelevance", "correct": True, "malformed": False,
    ...             "latency_s": 1.0}])["r"]["overall_ast"] is None
    True
"""

from __future__ import annotations

import gc
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from hammer_evals.concurrency import run_concurrently

from . import CATEGORIES
from .bfcl import ANSWER_KEY_DEFECTS, BfclEntry, load_category, score
from .runners import make_runner

RELEVANCE_CATEGORIES = ("irrelevance", "live_irrelevance", "live_relevance")


def load_entries(categories: Sequence[str], sample: int | None, seed: int = 0) -> tuple[list[BfclEntry], list[str]]:
    """The sampled entries of every category and the answer-key defects excluded from them."""
    entries: list[BfclEntry] = []
    excluded: list[str] = []
    for category in categories:
        if category not in CATEGORIES:
            raise ValueError(f"unknown BFCL category {category!r}; use some of {CATEGORIES}")
        got, dropped = load_category(category, sample, seed)
        entries += got
        excluded += dropped
    return entries, excluded


def run_accuracy(model_path: str, runner_kinds: Sequence[str], entries: Sequence[BfclEntry], *,
                 max_tokens: int = 256, n_ctx: int = 8192, n_threads: int | None = None,
                 records_file: Path | None = None, label: str = "", base_url: str | None = None,
                 concurrency: int = 1) -> list[dict[str, Any]]:
    """Every runner answers every entry; one record per (runner, entry), appended to ``records_file``.

    With ``base_url`` the ChatHammer runners ask that server, ``concurrency`` questions at a time
    (records then come in completion order); the other runners load the model and answer one by one.
    """
    records: list[dict[str, Any]] = []
    for kind in runner_kinds:
        runner = make_runner(kind, model_path, max_tokens=max_tokens, n_ctx=n_ctx, n_threads=n_threads,
                             base_url=base_url)
        at_once = concurrency if getattr(runner, "concurrent", False) else 1
        answers = run_concurrently(runner.answer, entries, at_once)
        for entry, outcome in tqdm(answers, total=len(entries), desc=f"{label}{runner.name}", unit="q"):
            verdict = score(entry, outcome.bfcl_output)
            record = {"runner": runner.name, "kind": kind, "id": entry.id, "category": entry.category,
                      "correct": verdict.correct, "error": verdict.error or outcome.error,
                      "malformed": outcome.malformed, "truncated": outcome.truncated, "n_calls": len(outcome.calls),
                      "output": outcome.bfcl_output, "latency_s": round(outcome.latency_s, 3), "raw": outcome.raw[:600]}
            records.append(record)
            if records_file is not None:
                with records_file.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        del runner
        gc.collect()
    return records


def summarize(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per runner: accuracy per category, overall AST accuracy (mean over the non-relevance categories,
    unweighted, as BFCL averages), irrelevance accuracy, malformed share, median latency."""
    out: dict[str, dict[str, Any]] = {}
    for runner in dict.fromkeys(r["runner"] for r in records):
        mine = [r for r in records if r["runner"] == runner]
        per_category: dict[str, dict[str, Any]] = {}
        for category in dict.fromkeys(r["category"] for r in mine):
            rows = [r for r in mine if r["category"] == category]
            per_category[category] = {"correct": sum(r["correct"] for r in rows), "n": len(rows),
                                      "accuracy": sum(r["correct"] for r in rows) / len(rows)}
        ast = [v["accuracy"] for c, v in per_category.items() if c not in RELEVANCE_CATEGORIES]
        irrelevance = [r for r in mine if "irrelevance" in r["category"]]
        out[runner] = {
            "per_category": per_category,
            "overall_ast": sum(ast) / len(ast) if ast else None,
            "irrelevance": sum(r["correct"] for r in irrelevance) / len(irrelevance) if irrelevance else None,
            "malformed_share": sum(r["malformed"] for r in mine) / len(mine),
            "malformed_truncated": sum(r["malformed"] and r.get("truncated", False) for r in mine),
            "median_latency_s": statistics.median(r["latency_s"] for r in mine),
            "n": len(mine),
        }
    return out


def excluded_defects(categories: Sequence[str]) -> dict[str, str]:
    """The answer-key defects that belong to the given categories."""
    return {k: v for k, v in ANSWER_KEY_DEFECTS.items() if k.rsplit("_", 1)[0] in categories}
