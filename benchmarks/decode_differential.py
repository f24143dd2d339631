"""Sample first, check after, against the full mask at every step, on fifty BFCL questions.

tests/real/test_decode_differential.py checks a dozen questions; this is the fifty-question version, for a
by-hand or scheduled run. For each question (BFCL's simple, multiple, parallel, parallel multiple and
irrelevance, drawn with a fixed seed):

* **steps**: one decode by the new loop, and at every step the old loop's pick on the same logits
  (tests/decode_steps.py); any difference is a failure (exit status 1);
* **answers**: a second decode by the old loop (``decoder.full_mask``), the answers compared whole. A
  decode of its own sees other batches, hence slightly other logits, so two answers may part at a near
  tie: those are reported, not failed (tests/real/test_fast_forward.py says why and bounds the margin);
* the time of each decode, and the full masks each loop computed.

Usage::

    .venv/bin/python benchmarks/decode_differential.py [--json out.json] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the step check is the test's own

from decode_steps import StepCheck, bfcl_questions  # noqa: E402

from hammer_plugins import HammerEngine  # noqa: E402
from hammer_plugins.backends.llama_cpp import LlamaCppBackend  # noqa: E402
from hammer_plugins.models.source import default_model_path  # noqa: E402

SAMPLE = (("simple_python", 12), ("multiple", 12), ("parallel", 9), ("parallel_multiple", 9), ("irrelevance", 8))
MAX_TOKENS = 160


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--limit", type=int, default=None, help="only the first N questions")
    args = parser.parse_args(argv)
    backend = LlamaCppBackend(str(default_model_path()), n_ctx=4096)
    engine = HammerEngine(backend=backend, max_tokens=MAX_TOKENS)
    check = StepCheck(backend)
    ends = None
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    with check.watching() as steps:
        for qid, messages, tools in bfcl_questions(SAMPLE)[: args.limit]:
            row: dict[str, Any] = {"id": qid}
            for old in (False, True):  # the new loop first, under the step check; then the old one
                backend.decoder.full_mask = old
                masks, differences = steps.full_masks, len(steps.differences)
                at = time.perf_counter()
                reply = engine.generate(messages, tools=tools)
                key = "old" if old else "new"
                row[f"{key}_seconds"] = round(time.perf_counter() - at, 3)
                row[f"{key}_full_masks"] = steps.full_masks - masks
                row[f"{key}_tokens"] = reply.usage.completion_tokens
                row[f"{key}_raw"] = reply.raw
                if not old:
                    ends = ends or frozenset(backend.vocabulary.tokenizer.eos_tokens)
                    if reply.finish_reason != "length":
                        check.check_end(ends)
                    row["step_differences"] = steps.differences[differences:]
            backend.decoder.full_mask = False
            row["same_answer"] = row["old_raw"] == row["new_raw"]
            rows.append(row)
            print(f"{qid}: {row['new_tokens']} tokens, new {row['new_seconds']} s ({row['new_full_masks']} masks), "
                  f"old {row['old_seconds']} s ({row['old_full_masks']} masks), "
                  f"{'same answer' if row['same_answer'] else 'answers part (a near tie?)'}, "
                  f"{len(row['step_differences'])} step differences", flush=True)
    summary = {"questions": len(rows), "steps": steps.picks, "from_logits": steps.free, "forced": steps.forced,
               "step_differences": len(steps.differences), "same_answers": sum(r["same_answer"] for r in rows),
               "new_seconds": round(sum(r["new_seconds"] for r in rows), 1),
               "old_seconds": round(sum(r["old_seconds"] for r in rows), 1),
               "new_full_masks": sum(r["new_full_masks"] for r in rows),
               "old_full_masks": sum(r["old_full_masks"] for r in rows),
               "wall_seconds": round(time.perf_counter() - started, 1)}
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "questions": rows}, indent=1) + "\n")
    return 1 if steps.differences else 0


if __name__ == "__main__":
    sys.exit(main())
