"""Run order and snapshot-level resume: prefix order (sorted prompts) against data order, the journal, ``--order``."""

from __future__ import annotations

import argparse
import json
import zlib
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hammer_evals.cli import add_eval_parser
from hammer_evals.hammerbench import evaluation, label_calls, load_file, load_predictions
from hammer_evals.hammerbench.cli import run_hammerbench
from hammer_evals.hammerbench.runner import RunnerConfig, load_journal, schedule_snapshots, snapshot_prompt
from hammer_plugins import HammerEngine
from hammer_plugins.backends.scripted import ScriptedBackend

FILES = ["ST_Perfect", "Based", "IS"]
STEMS = ["ST_Perfect", "HammerBench_Based", "HammerBench_IS"]  # evaluate's (paper) order
LIMIT = 2


class Killed(RuntimeError):
    """What the fake kill raises mid-run."""


def fenced(call: dict[str, Any] | None) -> str:
    return "```\n" + json.dumps([call], ensure_ascii=False) + "\n```" if call else "[]"


@pytest.fixture(scope="module")
def answers(hb_data: Path) -> dict[str, str]:
    """Prompt -> answer: the label, except about a third of prompts (picked by a hash) answer ``[]``.

    A function of the prompt alone, so any run order gets the same answers, and the wrong ones make
    the metrics something other than all 100%.
    """
    engine = HammerEngine(backend=ScriptedBackend())
    table = {}
    for stem in STEMS:
        for record in load_file(hb_data, stem, LIMIT):
            for turn, call in zip(record.turns, label_calls(record), strict=True):
                prompt = snapshot_prompt(engine, turn)
                table[prompt] = "[]" if zlib.crc32(prompt.encode()) % 3 == 0 else fenced(call)
    return table


class Counting(ScriptedBackend):
    """Answers from the table; raises after ``kill_after`` calls, as if the process died mid-snapshot."""

    def __init__(self, table: dict[str, str], kill_after: int | None = None) -> None:
        super().__init__(responder=self._answer)
        self.table, self.kill_after, self.calls = table, kill_after, 0

    def _answer(self, prompt: str) -> str:
        if self.kill_after is not None and self.calls >= self.kill_after:
            raise Killed("killed")
        self.calls += 1
        return self.table[prompt]


def run(hb_data: Path, backend: ScriptedBackend, out: Path | None = None, order: str = "prefix",
        resume: bool = False) -> evaluation.EvalResult:
    return evaluation.evaluate(hb_data, engine=HammerEngine(backend=backend), files=FILES, limit=LIMIT,
                               runner=RunnerConfig(order=order), output_dir=out, progress=False, resume=resume)  # type: ignore[arg-type]


def asked(journal: dict[tuple[str, int], dict[int, Any]]) -> int:
    """Journal lines that cost a model call (the others repeat an earlier identical prompt's answer)."""
    return sum(not p.reused for turns in journal.values() for p in turns.values())


def saved(out: Path) -> set[str]:
    """predictions.jsonl as a set of records, seconds left out (they differ from run to run)."""
    lines = set()
    for record in load_predictions(out / "predictions.jsonl").values():
        dump = record.model_dump(mode="json")
        for detail in dump["details"]:
            detail.pop("seconds")
            detail.pop("reused")
        lines.add(json.dumps(dump, sort_keys=True))
    return lines


def test_prefix_order_sorts_prompts_and_matches_data_order(hb_data: Path, answers: dict[str, str],
                                                           tmp_path: Path) -> None:
    total = sum(r.n_snapshots for stem in STEMS for r in load_file(hb_data, stem, LIMIT))
    data_backend, prefix_backend = Counting(answers), Counting(answers)
    by_data = run(hb_data, data_backend, tmp_path / "data", order="data")
    by_prefix = run(hb_data, prefix_backend, tmp_path / "prefix")
    # Greedy decoding: a prompt seen before (IS repeats Based's first turns) is answered once.
    distinct = len({snapshot_prompt(HammerEngine(backend=ScriptedBackend()), turn)
                    for stem in STEMS for record in load_file(hb_data, stem, LIMIT) for turn in record.turns})
    assert distinct < total
    assert data_backend.calls == prefix_backend.calls == distinct
    # Prefix order asks the very same prompts, sorted; data order is file, record, turn (not sorted here).
    assert prefix_backend.prompts == sorted(data_backend.prompts)
    reused = [d for r in load_predictions(tmp_path / "prefix" / "predictions.jsonl").values() for d in r.details if d.reused]
    assert len(reused) == total - distinct and all(d.seconds == 0 for d in reused)
    assert data_backend.prompts != prefix_backend.prompts
    expected = [snapshot_prompt(HammerEngine(backend=ScriptedBackend()), turn)
                for stem in STEMS for record in load_file(hb_data, stem, LIMIT) for turn in record.turns]
    assert data_backend.prompts == list(dict.fromkeys(expected))  # first occurrences, in data order
    assert saved(tmp_path / "data") == saved(tmp_path / "prefix") and len(saved(tmp_path / "prefix")) == 3 * LIMIT
    assert by_prefix.per_file == by_data.per_file and by_prefix.per_type == by_data.per_type
    assert by_prefix.overall == by_data.overall and by_prefix.records == by_data.records
    assert 0 < by_prefix.per_type["sQsA"].acc < 1  # the hashed wrong answers count
    # Per-snapshot seconds still reach the timing; the finished runs leave no journal behind.
    assert by_prefix.timing is not None and by_prefix.timing.snapshots == total
    assert by_prefix.timing.reused_snapshots == total - distinct  # left out of the per-prompt means
    assert not (tmp_path / "prefix" / "snapshots.jsonl").exists()
    assert json.loads((tmp_path / "prefix" / "results.json").read_text())["config"]["runner"]["order"] == "prefix"


def test_schedule_is_stable_and_skips_done_turns(hb_data: Path) -> None:
    engine = HammerEngine(backend=ScriptedBackend())
    records = load_file(hb_data, "HammerBench_Based", LIMIT)
    twice = records + [r.model_copy(update={"file": "copy"}) for r in records]  # the same prompts again
    jobs = schedule_snapshots(engine, twice)
    prompts = [snapshot_prompt(engine, record.turns[n]) for record, n, _ in jobs]
    assert prompts == [job.prompt for job in jobs]
    assert prompts == sorted(prompts)
    # Equal prompts keep data order: the original file's snapshot comes before its copy's.
    for first, second in zip(jobs[::2], jobs[1::2], strict=True):
        assert (first[0].file, second[0].file) == ("HammerBench_Based", "copy") and first[1] == second[1]
    left = schedule_snapshots(engine, records, done={("HammerBench_Based", 0): [0, 2]})
    assert sorted((r.index, n) for r, n, _ in left) == [(0, 1), (1, 0), (1, 1), (1, 2)]


def test_killed_run_resumes_from_the_journal(hb_data: Path, answers: dict[str, str], tmp_path: Path) -> None:
    total = sum(r.n_snapshots for stem in STEMS for r in load_file(hb_data, stem, LIMIT))
    distinct = len(set(answers))
    uninterrupted = Counting(answers)
    whole = run(hb_data, uninterrupted, tmp_path / "whole")
    out = tmp_path / "killed"
    first = Counting(answers, kill_after=8)
    with pytest.raises(Killed):
        run(hb_data, first, out)
    journal = load_journal(out / "snapshots.jsonl")
    assert asked(journal) == first.calls == 8
    complete = load_predictions(out / "predictions.jsonl")
    assert complete and all(len(journal[key]) == len(p.predictions) for key, p in complete.items())
    assert set(journal) - set(complete)  # prefix order left some records half done
    # Killed between the journal line and the record line (the record's line is dropped here),
    # and killed while writing a journal line (a cut last line): neither costs a model call.
    # A whole last line without its newline (hand-edited) is kept.
    lines = (out / "predictions.jsonl").read_text().splitlines(keepends=True)
    assert len(lines) >= 2
    (out / "predictions.jsonl").write_text("".join(lines[:-1]).rstrip("\n"))
    with (out / "snapshots.jsonl").open("a") as stream:
        stream.write('{"file": "HammerBench_Ba')
    # Killed again after one more snapshot: the cut line was removed, so the journal reads cleanly.
    second = Counting(answers, kill_after=1)
    with pytest.raises(Killed):
        run(hb_data, second, out, resume=True)
    assert asked(load_journal(out / "snapshots.jsonl")) == 8 + 1
    assert second.prompts[0] == first.prompts[-1]  # the snapshot in flight at the kill is asked again
    third = Counting(answers)
    resumed = run(hb_data, third, out, resume=True)
    assert third.calls == distinct - 8 - 1  # prompts answered before a kill are reused after it too
    # Every snapshot was asked once over the three runs, besides the ones in flight at the kills.
    assert Counter(first.prompts[:-1] + second.prompts[:-1] + third.prompts) == Counter(uninterrupted.prompts)
    assert saved(out) == saved(tmp_path / "whole")
    assert resumed.per_type == whole.per_type and resumed.records == whole.records and not resumed.missing_predictions
    assert resumed.timing is not None and resumed.timing.snapshots == total
    assert not (out / "snapshots.jsonl").exists()
    # Resuming a finished run asks nothing; a run without --resume starts both files afresh.
    idle = Counting(answers, kill_after=0)
    assert run(hb_data, idle, out, resume=True).per_type == whole.per_type and idle.calls == 0
    with pytest.raises(Killed):
        run(hb_data, Counting(answers, kill_after=2), out)
    journal = load_journal(out / "snapshots.jsonl")
    assert asked(journal) == 2
    assert set(load_predictions(out / "predictions.jsonl")) <= set(journal)


def test_journal_of_other_files_is_kept(hb_data: Path, answers: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(Killed):
        evaluation.evaluate(hb_data, engine=HammerEngine(backend=Counting(answers, kill_after=1)), files=["Based"],
                            limit=LIMIT, output_dir=tmp_path, progress=False)
    # A resumed run on another file completes, but the journal still holds Based's half-done record.
    evaluation.evaluate(hb_data, engine=HammerEngine(backend=Counting(answers)), files=["ST_Perfect"], limit=LIMIT,
                        output_dir=tmp_path, progress=False, resume=True)
    journal = load_journal(tmp_path / "snapshots.jsonl")
    assert sum(len(t) for (file, _), t in journal.items() if file == "HammerBench_Based") == 1
    assert set(load_predictions(tmp_path / "predictions.jsonl")) == {("ST_Perfect", 0), ("ST_Perfect", 1)}
    # Resuming Based asks only its other 5 snapshots; then every journaled record has its line and the journal goes.
    rest = Counting(answers)
    evaluation.evaluate(hb_data, engine=HammerEngine(backend=rest), files=["Based"], limit=LIMIT, output_dir=tmp_path,
                        progress=False, resume=True)
    assert rest.calls == 5 and len(load_predictions(tmp_path / "predictions.jsonl")) == 4
    assert not (tmp_path / "snapshots.jsonl").exists()


def test_order_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser(prog="hammer")
    add_eval_parser(parser.add_subparsers(dest="command"))
    base = ["eval", "hammerbench", "--data", "d", "--output", str(tmp_path), "--predictions", "p.jsonl"]
    assert parser.parse_args(base).order == "prefix"
    args = parser.parse_args([*base, "--order", "data"])
    assert args.order == "data"
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--order", "random"])
    seen: dict[str, Any] = {}

    def fake_evaluate(data: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        (tmp_path / "table.md").write_text("table")
        return SimpleNamespace(missing_predictions=[], timing=None, overall=None)

    monkeypatch.setattr(evaluation, "evaluate", fake_evaluate)
    assert run_hammerbench(args) == 0
    assert seen["runner"].order == "data"


def test_resume_refuses_answers_made_with_other_settings(hb_data: Path, answers: dict[str, str], tmp_path: Path) -> None:
    with pytest.raises(Killed):
        run(hb_data, Counting(answers, kill_after=3), tmp_path)
    masked = HammerEngine(backend=Counting(answers), mask_names=True)
    with pytest.raises(ValueError, match="other settings \\(mask_names"):
        evaluation.evaluate(hb_data, engine=masked, files=FILES, limit=LIMIT, output_dir=tmp_path, progress=False,
                            resume=True)
    same = Counting(answers)
    resumed = run(hb_data, same, tmp_path, resume=True)
    assert not resumed.missing_predictions and same.calls == len(set(answers)) - 3
