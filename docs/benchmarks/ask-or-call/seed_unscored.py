"""Mark the snapshots a HammerBench file's official mode does not score as done, so that
``hammer eval hammerbench --resume`` asks the model only for the ones it scores (and the first, whose function
name decides Func.Acc and whether the conversation counts at all).

SO, External and IS score one or two snapshots of conversations of two to seven; on a shared 2-core machine
(40-90 s a prompt) running the rest cost most of the time and changed no figure of the official mode. Each
such snapshot is journaled as ``no_call`` with ``reason`` saying it was not run; the evaluator's official
mode never reads it (``--mode all`` would: do not use these records for it).

    PYTHONPATH=.:evals python docs/benchmarks/ask-or-call/seed_unscored.py OUT HammerBench_IS 6
    hammer eval hammerbench --resume --output OUT --files HammerBench_IS --limit 6 ...

``--data DIR`` (last) reads the records from the folder the run is given with ``hammer eval hammerbench --data``
(the Chinese files: the dataset's ``zh`` folder, whose ``multi-turn/snapshot_id/`` lists the scored snapshots);
without it, the English copy shipped in the package.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hammer_evals.datasets import hammerbench_dir
from hammer_evals.hammerbench.data import load_file
from hammer_evals.hammerbench.runner import JournalEntry, SnapshotPrediction, write_snapshot

NOT_RUN = "not run: the official mode does not score this snapshot"


def seed(out: Path, stems: list[str], limit: int, data: Path | None = None) -> int:
    out.mkdir(parents=True, exist_ok=True)
    seeded = 0
    with (out / "snapshots.jsonl").open("a", encoding="utf-8") as stream:
        for stem in stems:
            for record in load_file(data or hammerbench_dir(), stem, limit):
                for turn in range(record.n_snapshots):
                    if turn == 0 or turn in record.scored:
                        continue
                    write_snapshot(stream, JournalEntry(file=record.file, index=record.index, turn=turn,
                                                        prediction=SnapshotPrediction(output="no_call", reason=NOT_RUN)))
                    seeded += 1
    return seeded


if __name__ == "__main__":
    args = sys.argv[1:]
    data = Path(args.pop(args.index("--data") + 1)) if "--data" in args[:-1] else None
    out, *stems, limit = [a for a in args if a != "--data"]
    print(f"{seed(Path(out), stems, int(limit), data)} unscored snapshots marked as done in {out}/snapshots.jsonl")
