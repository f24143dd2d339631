"""Replay a `hammer eval hammerbench` run's raw model answers through the engine under another ``on_missing``.

The ask-or-call rule acts after generation: with greedy decoding the prompt and the grammar are the same
with the rule on or off, so the model's raw answer is too. Replaying each recorded ``raw`` through the
engine's own pipeline (a scripted backend that answers it, the runner's ``predict_turn``) gives the answers
the rule would have given, without running the model again (the machine these ran on was shared, and a
run cost up to 45 s a prompt). ``--on-missing call`` reproduces the recorded run's predictions exactly,
which this script checks.

    PYTHONPATH=.:evals python docs/benchmarks/ask-or-call/replay.py \\
        docs/benchmarks/ask-or-call/ST_Imperfect-off ST_Imperfect 25 ask /tmp/ask.jsonl
    hammer eval hammerbench --predictions /tmp/ask.jsonl --files ST_Imperfect --limit 25 \\
        --output docs/benchmarks/ask-or-call/ST_Imperfect-ask --name "default, on_missing=ask"

``--data DIR`` (last) reads the records from the folder the run was given with ``hammer eval hammerbench --data``
(the Chinese files: the dataset's ``zh`` folder); without it, the English copy shipped in the package.

The question the rule wrote for each held call is not part of a prediction; ``questions.jsonl`` next to the
output keeps it (file, index, turn, question), so the wording and its language can be read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hammer_evals.datasets import hammerbench_dir
from hammer_evals.hammerbench.data import load_file
from hammer_evals.hammerbench.runner import RunnerConfig, SnapshotPrediction, predict_turn, record_prediction
from hammer_plugins import HammerEngine, HammerResponse, ScriptedBackend

NOT_RUN = "not run:"  # a snapshot seed_unscored.py marked as done (official mode never scores it): kept as it is


class _Kept:
    """The engine, keeping its last answer (``predict_turn`` keeps the held call, not the question)."""

    def __init__(self, engine: HammerEngine) -> None:
        self.engine, self.answer = engine, None

    def generate(self, *args: object, **kwargs: object) -> HammerResponse:
        self.answer = self.engine.generate(*args, **kwargs)  # type: ignore[arg-type]
        return self.answer


def replay(run: Path, stems: list[str], limit: int, on_missing: str, data: Path | None = None,
           questions: list[dict] | None = None) -> list[str]:
    records = {(r.file, r.index): r for stem in stems for r in load_file(data or hammerbench_dir(), stem, limit)}
    config = RunnerConfig(**json.loads((run / "run_settings.json").read_text())["runner"])
    lines = []
    for line in (run / "predictions.jsonl").read_text(encoding="utf-8").splitlines():
        recorded = json.loads(line)
        record = records[(recorded["file"], recorded["index"])]
        details = []
        for turn, detail in zip(record.turns, recorded["details"], strict=True):
            if (detail.get("reason") or "").startswith(NOT_RUN):
                details.append(SnapshotPrediction.model_validate(detail))
                continue
            engine = _Kept(HammerEngine(backend=ScriptedBackend([detail["raw"]]), on_missing=on_missing))  # type: ignore[arg-type]
            details.append(predict_turn(engine, turn, config))  # type: ignore[arg-type]
            if questions is not None and details[-1].asked and engine.answer is not None:
                questions.append({"file": record.file, "index": record.index, "turn": turn.index,
                                  "question": engine.answer.text})
        replayed = record_prediction(record, details)
        if on_missing == "call":  # the rule off: the recorded answers, exactly
            assert replayed.predictions == recorded["predictions"], (recorded["index"], replayed.predictions)
        lines.append(replayed.model_dump_json())
    return lines


if __name__ == "__main__":
    args = sys.argv[1:]
    data = Path(args.pop(args.index("--data") + 1)) if "--data" in args[:-1] else None
    args = [a for a in args if a != "--data"]
    run, stems, limit, on_missing, out = args[:5]  # stems: one or more file stems, comma-separated
    replay(Path(run), stems.split(","), int(limit), "call", data)  # the check: the replay is faithful
    asked: list[dict] = []
    Path(out).write_text("\n".join(replay(Path(run), stems.split(","), int(limit), on_missing, data, asked)) + "\n",
                         encoding="utf-8")
    (Path(out).parent / "questions.jsonl").write_text(
        "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in asked), encoding="utf-8")
    print(f"wrote {out} and {len(asked)} questions in {Path(out).parent / 'questions.jsonl'}")
