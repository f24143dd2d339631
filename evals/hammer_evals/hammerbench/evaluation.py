"""One HammerBench evaluation: load files, predict (or read predictions), score, report.

Example:
    >>> from hammer_evals.hammerbench import evaluate
    >>> # result = evaluate("/data/hammerbench/en", engine=HammerEngine(), files=["Based"], limit=3,
    >>> #                   output_dir="hb-out")
    >>> # print(result.overall)
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from hammer_plugins.engine import HammerEngine

from ..concurrency import effective_concurrency, run_concurrently
from ..run_journal import RUN_SETTINGS, check_resumable, drop_partial_line, write_json
from .data import FILE_SPECS, BenchRecord, ScoringMode, available_files, load_file
from .metrics import Language, Metrics, RecordScore, aggregate, score_record
from .report import known_file_order, markdown_table, overall, write_charts
from .runner import (
    JournalEntry,
    RecordPrediction,
    RunnerConfig,
    ScheduledSnapshot,
    SnapshotPrediction,
    load_journal,
    load_predictions,
    predict_turn,
    record_prediction,
    schedule_snapshots,
    snapshot_prompt,
    write_prediction,
    write_snapshot,
)


class Timing(BaseModel):
    """Where the time went, and what the whole files would take at the measured speed.

    ``snapshots`` counts every answered snapshot, ``reused_snapshots`` those that repeated an
    earlier prompt and cost nothing; the means are over the snapshots the model was asked, so the
    estimates (mean times snapshots) are upper bounds for a run that reuses answers.

    Example:
        >>> Timing(wall_seconds=10, model_seconds=8, snapshots=4, seconds_per_snapshot=2).seconds_per_snapshot
        2.0
    """

    wall_seconds: float
    model_seconds: float
    snapshots: int
    reused_snapshots: int = 0
    seconds_per_snapshot: float | None = None
    per_file_seconds_per_snapshot: dict[str, float] = Field(default_factory=dict)
    full_snapshots: int = 0
    estimated_full_seconds: float | None = None
    all_files_snapshots: int = 0
    estimated_all_files_seconds: float | None = None


class EvalResult(BaseModel):
    """Everything one run produced: metrics per file, per data type, overall, and per record.

    Example:
        >>> EvalResult(name="x", files=[], per_file={}, per_type={}, overall=None).summary()["name"]
        'x'
    """

    name: str
    model: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    files: list[str]
    limit: int | None = None
    per_file: dict[str, Metrics]
    per_type: dict[str, Metrics]
    overall: float | None
    records: list[RecordScore] = Field(default_factory=list)
    missing_predictions: list[str] = Field(default_factory=list)
    timing: Timing | None = None

    def summary(self) -> dict[str, Any]:
        """The JSON written to ``results.json`` (per-record verdicts go to ``scores.jsonl``)."""
        return self.model_dump(mode="json", exclude={"records"})


def evaluate(
    data_dir: str | Path,
    *,
    engine: HammerEngine | None = None,
    predictions: str | Path | Mapping[tuple[str, int], RecordPrediction] | None = None,
    files: Sequence[str] | None = None,
    limit: int | None = None,
    mode: ScoringMode | None = None,
    runner: RunnerConfig | None = None,
    language: Language = "en",
    output_dir: str | Path | None = None,
    progress: bool = True,
    resume: bool = False,
    name: str | None = None,
    concurrency: int = 1,
) -> EvalResult:
    """Evaluate ``engine`` (or a predictions file) on HammerBench files under ``data_dir``.

    ``files``: stems, short names or data types (default: every file present); ``limit``: first N
    records per file; ``mode``: ``"all"`` scores every snapshot of every file (default: each file's
    official mode). With ``output_dir`` each answer is journaled to ``snapshots.jsonl`` as it comes and
    a record's line goes to ``predictions.jsonl`` once all its snapshots are in (``resume`` skips the
    snapshots already in either file); the reports are written at the end. ``runner.order`` picks the
    run order (``"prefix"``: sorted by prompt, for KV-cache reuse). ``concurrency``: snapshots in
    flight at once (a server with several slots; a local model answers one at a time).
    """
    if engine is None and predictions is None:
        raise ValueError("evaluate needs an engine or a predictions file")
    started = time.perf_counter()
    stems = known_file_order(available_files(data_dir, files))
    records = [r for stem in stems for r in load_file(data_dir, stem, limit, mode)]
    runner = runner or RunnerConfig()
    out = Path(output_dir) if output_dir is not None else None
    if predictions is not None:
        preds = dict(predictions) if isinstance(predictions, Mapping) else load_predictions(predictions)
    else:
        assert engine is not None
        preds = _predict(engine, records, runner, out, progress, resume, concurrency)
    scores: list[RecordScore] = []
    missing: list[str] = []
    for record in records:
        found = preds.get((record.file, record.index))
        if found is None:
            missing.append(f"{record.file}#{record.index}")
            continue
        scores.append(score_record(record, found.predictions, language))
    per_file = {stem: aggregate([s for s in scores if s.file == stem]) for stem in stems}
    types = list(dict.fromkeys(FILE_SPECS[s].data_type for s in stems))
    per_type = {t: aggregate([s for s in scores if s.data_type == t]) for t in types}
    model = engine.model_name if engine is not None else None
    result = EvalResult(
        name=name or model or (Path(str(predictions)).stem if predictions is not None and not isinstance(predictions, Mapping)
                               else "predictions"),
        model=model, config=_config(engine, runner, mode, language, predictions), files=stems, limit=limit,
        per_file=per_file, per_type=per_type, overall=overall(per_type), records=scores, missing_predictions=missing,
        timing=_timing(data_dir, stems, records, preds, time.perf_counter() - started) if engine is not None else None,
    )
    if out is not None:
        write_results(result, out)
    return result


PREDICTIONS = "predictions.jsonl"
JOURNAL = "snapshots.jsonl"


def run_settings(engine: HammerEngine, runner: RunnerConfig) -> dict[str, Any]:
    """Everything besides the prompt data that decides a model's answers: what a resumed run must share.

    Example:
        >>> from hammer_plugins.backends.scripted import ScriptedBackend
        >>> run_settings(HammerEngine(backend=ScriptedBackend()), RunnerConfig())["runner"]["layout"]
        'transcript'
    """
    # The ask-or-call rule changes the answers scored; recorded only when on, so that older runs still resume.
    rule = {"on_missing": engine.on_missing} if engine.on_missing != "call" else {}
    return {
        **rule,
        "model": engine.model_name, "backend": engine.backend_name, "prompt_format": engine.prompt_format,
        "constrained": engine.constrained, "mask_names": engine.mask_names if runner.mask_names is None else runner.mask_names,
        "sampling": engine.settings.model_dump(mode="json", exclude={"max_tokens", "shared_prefix_chars"}),
        "max_tokens": runner.max_tokens or engine.settings.max_tokens,
        "runner": runner.model_dump(mode="json", exclude={"order", "mask_names", "max_tokens"}),
    }


def _predict(engine: HammerEngine, records: list[BenchRecord], runner: RunnerConfig, out: Path | None,
             progress: bool, resume: bool, concurrency: int = 1) -> dict[tuple[str, int], RecordPrediction]:
    """Run every snapshot not done yet, in ``runner.order``, journaling each and writing records as they complete.

    With ``runner.order == "prefix"`` records complete out of order, so each finished snapshot goes
    to ``snapshots.jsonl`` first and a record's ``predictions.jsonl`` line follows when its last
    snapshot is in. ``resume`` reads both; without it both start empty. The journal is removed at
    the end when everything in it has reached ``predictions.jsonl``.
    """
    from tqdm.auto import tqdm

    wanted = {(r.file, r.index): r.n_snapshots for r in records}
    preds: dict[tuple[str, int], RecordPrediction] = {}
    partial: dict[tuple[str, int], dict[int, SnapshotPrediction]] = {}
    saved: set[tuple[str, int]] = set()       # records with a predictions.jsonl line (this selection or not)
    journaled: set[tuple[str, int]] = set()   # records with journal lines
    path = out / PREDICTIONS if out is not None else None
    journal_path = out / JOURNAL if out is not None else None
    if out is not None:
        settings = run_settings(engine, runner)
        if resume:
            check_resumable(out, settings)
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / RUN_SETTINGS, settings)
    if path is not None and journal_path is not None and resume:
        if path.is_file():
            drop_partial_line(path)
            done = load_predictions(path)
            saved = set(done)
            preds.update({k: v for k, v in done.items() if k in wanted})
        if journal_path.is_file():
            drop_partial_line(journal_path)
            journal = load_journal(journal_path)
            journaled = set(journal)
            # Turns beyond the record's length (the data changed since) are ignored, not trusted.
            partial = {k: {t: p for t, p in v.items() if t < wanted[k]} for k, v in journal.items()
                       if k in wanted and k not in preds}
    todo = schedule_snapshots(engine, [r for r in records if (r.file, r.index) not in preds], runner, partial)
    with contextlib.ExitStack() as stack:
        stream = journal_stream = None
        if path is not None and journal_path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            stream = stack.enter_context(path.open("a" if resume else "w", encoding="utf-8"))
            journal_stream = stack.enter_context(journal_path.open("a" if resume else "w", encoding="utf-8"))

        def complete(record: BenchRecord) -> None:
            key = (record.file, record.index)
            found = partial.pop(key, {})
            preds[key] = prediction = record_prediction(record, [found[t] for t in range(record.n_snapshots)])
            if stream is not None:
                write_prediction(stream, prediction)
                saved.add(key)

        # A record whose snapshots are all journaled but whose line is missing (killed between the two
        # writes, or a record with no snapshot at all) is complete without asking the model again.
        for record in records:
            key = (record.file, record.index)
            if key not in preds and len(partial.get(key, {})) == record.n_snapshots:
                complete(record)
        bar = stack.enter_context(tqdm(total=len(todo), unit="snapshot", disable=not progress, dynamic_ncols=True))
        shown = None
        # Greedy decoding answers a prompt the same way every time, and 1,238 of the 3,535 English
        # snapshots repeat another's prompt exactly (files share conversations): ask each prompt once.
        greedy = engine.settings.temperature == 0
        answered: dict[str, SnapshotPrediction] = {}
        if greedy:  # a resumed run also reuses what the earlier runs asked
            for record in records:
                key = (record.file, record.index)
                known = dict(enumerate(preds[key].details)) if key in preds else partial.get(key, {})
                for number, prediction in known.items():
                    if not prediction.reused and number < record.n_snapshots:
                        answered.setdefault(snapshot_prompt(engine, record.turns[number], runner), prediction)
        def finish(job: ScheduledSnapshot, prediction: SnapshotPrediction) -> None:
            nonlocal shown
            record, number = job.record, job.turn
            if record.file != shown:  # redraw only when the file changes: prefix order hops between files
                shown = record.file
                bar.set_description(record.file.removeprefix("HammerBench_"))
            key = (record.file, record.index)
            partial.setdefault(key, {})[number] = prediction
            if journal_stream is not None:
                write_snapshot(journal_stream, JournalEntry(file=record.file, index=record.index, turn=number,
                                                            prediction=prediction))
                journaled.add(key)
            bar.update(1)
            if len(partial[key]) == record.n_snapshots:
                complete(record)

        # One question per distinct prompt under greedy decoding (the rest copy its answer), one per
        # snapshot otherwise; in schedule order, so the server still sees prefix-sorted prompts.
        groups: dict[Any, list[ScheduledSnapshot]] = {}
        for number, job in enumerate(todo):
            groups.setdefault(job.prompt if greedy else number, []).append(job)
        questions = []
        for jobs in groups.values():
            earlier = answered.get(jobs[0].prompt) if greedy else None
            if earlier is None:
                questions.append(jobs)
                continue
            for job in jobs:
                finish(job, earlier.model_copy(update={"seconds": 0.0, "reused": True}))

        def ask(jobs: list[ScheduledSnapshot]) -> SnapshotPrediction:
            return predict_turn(engine, jobs[0].record.turns[jobs[0].turn], runner)

        for jobs, prediction in run_concurrently(ask, questions, effective_concurrency(engine, concurrency)):
            answered[jobs[0].prompt] = prediction
            finish(jobs[0], prediction)
            for job in jobs[1:]:
                finish(job, prediction.model_copy(update={"seconds": 0.0, "reused": True}))
    # Every journal line is now also in predictions.jsonl: the journal holds nothing more, so it goes.
    # Lines of records outside this selection (an earlier run on other files) keep it for their resume.
    if journal_path is not None and journaled <= saved:
        journal_path.unlink(missing_ok=True)
    return preds


def _config(engine: HammerEngine | None, runner: RunnerConfig, mode: ScoringMode | None, language: str,
            predictions: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"mode": mode or "official", "language": language}
    if engine is not None:
        config.update({
            "runner": runner.model_dump(), "prompt_format": engine.prompt_format, "constrained": engine.constrained,
            "mask_names": engine.mask_names if runner.mask_names is None else runner.mask_names,
            "max_tokens": runner.max_tokens or engine.settings.max_tokens, "backend": engine.backend_name,
        })
    elif predictions is not None and not isinstance(predictions, Mapping):
        config["predictions"] = str(predictions)
    return config


def _timing(data_dir: str | Path, stems: list[str], records: list[BenchRecord],
            preds: Mapping[tuple[str, int], RecordPrediction], wall: float) -> Timing:
    per_file: dict[str, list[float]] = {}
    answered = reused = 0
    for record in records:
        found = preds.get((record.file, record.index))
        if found is not None and found.details:
            answered += len(found.details)
            reused += sum(d.reused for d in found.details)
            per_file.setdefault(record.file, []).extend(d.seconds for d in found.details if not d.reused)
    all_times = [t for times in per_file.values() for t in times]
    mean = sum(all_times) / len(all_times) if all_times else None
    file_means = {stem: sum(times) / len(times) for stem, times in per_file.items() if times}
    full_counts = {stem: sum(r.n_snapshots for r in load_file(data_dir, stem)) for stem in stems}
    every = {stem: sum(r.n_snapshots for r in load_file(data_dir, stem)) for stem in available_files(data_dir)}
    estimate = sum(n * file_means.get(stem, mean or 0.0) for stem, n in full_counts.items()) if mean else None
    return Timing(
        wall_seconds=wall, model_seconds=sum(all_times), snapshots=answered, reused_snapshots=reused,
        seconds_per_snapshot=mean,
        per_file_seconds_per_snapshot=file_means, full_snapshots=sum(full_counts.values()),
        estimated_full_seconds=estimate, all_files_snapshots=sum(every.values()),
        estimated_all_files_seconds=mean * sum(every.values()) if mean else None,
    )


def write_results(result: EvalResult, output_dir: str | Path) -> dict[str, Path]:
    """Write ``results.json``, ``scores.jsonl``, ``table.md`` and the PNG charts into ``output_dir``."""

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"results": write_json(out / "results.json", result.summary())}
    scores = out / "scores.jsonl"
    with scores.open("w", encoding="utf-8") as stream:
        for record in result.records:
            stream.write(json.dumps(record.model_dump(mode="json"), ensure_ascii=False) + "\n")
    paths["scores"] = scores
    notes = [f"files: {', '.join(result.files)}" + (f" (first {result.limit} records each)" if result.limit else "")]
    if result.missing_predictions:
        notes.append(f"{len(result.missing_predictions)} records had no prediction and were not scored")
    if result.timing is not None and result.timing.seconds_per_snapshot is not None:
        t = result.timing
        notes.append(f"{t.snapshots} snapshots ({t.reused_snapshots} repeating an earlier prompt, answered once) in "
                     f"{t.model_seconds:.0f} s of model time ({t.seconds_per_snapshot:.2f} s per prompt asked); "
                     f"all records of these files: at most ~{t.estimated_full_seconds or 0:.0f} s")
    table = out / "table.md"
    table.write_text(markdown_table(result.name, result.per_type, result.per_file, notes), encoding="utf-8")
    paths["table"] = table
    for chart in write_charts(result.per_type, out, title=result.name):
        paths[chart.stem] = chart
    return paths
