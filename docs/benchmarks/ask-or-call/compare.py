"""Compare a rule-off run with its rule-on replay, snapshot by snapshot (the scored ones): how many answers the
rule turned into asks, and which right answers it made wrong or wrong ones right; written to ``compare.json`` in
the rule-on folder.

    python docs/benchmarks/ask-or-call/compare.py docs/benchmarks/ask-or-call/ST_Perfect-off \\
        docs/benchmarks/ask-or-call/ST_Perfect-ask
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def compare(off: Path, on: Path) -> dict[str, int]:
    before = {(s["file"], s["index"]): s for s in _lines(off / "scores.jsonl")}
    after = {(s["file"], s["index"]): s for s in _lines(on / "scores.jsonl")}
    asked = {(p["file"], p["index"], i) for p in _lines(on / "predictions.jsonl")
             for i, d in enumerate(p.get("details") or []) if d.get("asked")}
    counts = {"scored snapshots": 0, "asked": 0, "right both ways": 0, "wrong to right": 0, "right to wrong": 0}
    for key, record in before.items():
        for old, new in zip(record["snapshots"], after[key]["snapshots"], strict=True):
            if not old["scored"]:
                continue
            counts["scored snapshots"] += 1
            counts["asked"] += (key[0], key[1], old["index"]) in asked
            counts["right both ways"] += old["correct"] and new["correct"]
            counts["wrong to right"] += not old["correct"] and new["correct"]
            counts["right to wrong"] += old["correct"] and not new["correct"]
    return counts


if __name__ == "__main__":
    counts = compare(Path(sys.argv[1]), Path(sys.argv[2]))
    (Path(sys.argv[2]) / "compare.json").write_text(json.dumps(counts, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(counts))
