"""HammerBench metrics with the official evaluator's rules, reading Hammer's answers correctly.

Rules (``evaluate.py``, ``evaluation/metrics.py`` and ``evaluation/llm_judge.py`` of
MadeAgents/HammerBench):

* A snapshot's arguments are right when no predicted key is missing from the label ("extra keys
  wrong") and every label value matches the predicted one with ROUGE-L F >= 0.7; empty-string
  values are ignored on both sides, and values are compared as ``str(value)``.
* **Func.Acc**: the predicted function name equals the label's at the first snapshot.
* **Acc**: right snapshots over scored snapshots; a conversation whose first name is wrong counts 0.
* **PR**: index of the first wrong scored snapshot over their number (1 when all are right, 0 when
  the first name is wrong); **SR**: every scored snapshot right (and the first name right).
* **PHR** / **PMR**: share of scored snapshots with a predicted key absent from the label / a label
  key absent from the prediction, counted only in conversations whose first name is right; an
  answer without a call misses every label key.

Deviations, all documented in ``docs/hammerbench.md``: answers are parsed by the engine's parser
(fenced lists, bare lists, prose around JSON; the official parser fails on Hammer's fenced list),
``[]`` and answers without a call count as "no call" (a correct refusal where none is expected;
the official evaluator wants the exact termination text or "sorry"), each snapshot's function
name is checked (not only the first one's), ``None`` values count as empty, identical values
score 1 before ROUGE, and ROUGE-L is computed with ``rouge-score`` (its tokenizer drops
punctuation) rather than the unmaintained ``rouge`` package.

Example:
    >>> arguments_correct({"city": "Guangzhou", "time": "March 15, 2023"},
    ...                   {"city": "guangzhou", "time": "March 15, 2023 at 2pm"})
    True
    >>> arguments_correct({"city": "Guangzhou"}, {"city": "Guangzhou", "time": "today"})
    False
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from hammer_plugins.output.parsing import parse_output

from .data import BenchRecord

OutputKind = Literal["call", "no_call", "invalid"]
Language = Literal["en", "zh"]
ROUGE_THRESHOLD = 0.7

_CJK = re.compile(r"([\u4e00-\u9fff])")


class _CjkTokenizer:
    """Chinese characters one token each, other text split on whitespace (as the official zh rule)."""

    def tokenize(self, text: str) -> list[str]:
        return _CJK.sub(r" \1 ", text.lower()).split()


_SCORERS: dict[str, Any] = {}
_SCORER_LOCK = threading.Lock()


def _scorer(language: Language) -> Any:
    with _SCORER_LOCK:
        if language not in _SCORERS:
            try:
                from rouge_score import rouge_scorer
            except ImportError as exc:  # pragma: no cover - depends on the environment
                raise ImportError("HammerBench metrics need rouge-score. Fix: pip install hammer-evals"
                                  " (or pip install rouge-score)") from exc
            tokenizer = _CjkTokenizer() if language == "zh" else None
            _SCORERS[language] = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False, tokenizer=tokenizer)
        return _SCORERS[language]


def rouge_l(reference: str, hypothesis: str, language: Language = "en") -> float:
    """ROUGE-L F of a predicted value against the label value, normalized as the official evaluator does.

    Example:
        >>> round(rouge_l("March 15, 2023", "March 15, 2023 at 2pm"), 2)
        0.75
        >>> rouge_l("", "x"), rouge_l("", "")
        (0.0, 1.0)
    """
    if reference == "" and hypothesis == "":
        return 1.0
    if reference == "" or hypothesis == "":
        return 0.0
    if language == "zh":
        reference, hypothesis = reference.strip("。！ "), hypothesis.strip("。！ ")
    else:
        reference, hypothesis = reference.strip(".?! ").lower(), hypothesis.strip(".?! ").lower()
    if reference == hypothesis:
        return 1.0
    return float(_scorer(language).score(reference, hypothesis)["rougeL"].fmeasure)


def _as_text(arguments: Mapping[str, Any] | None) -> dict[str, str]:
    """Values as the official evaluator compares them: ``str(value)``, empty ones dropped."""
    out: dict[str, str] = {}
    for key, value in (arguments or {}).items():
        if value is None or value == "" or value == "\\":
            continue
        out[str(key)] = str(value)
    return out


def arguments_correct(label: Mapping[str, Any], predicted: Mapping[str, Any] | None, language: Language = "en",
                      threshold: float = ROUGE_THRESHOLD) -> bool:
    """The official argument check: no extra key, every non-empty label value matched at ROUGE-L >= 0.7."""
    if predicted is None:
        return False
    gold, pred = _as_text(label), _as_text(predicted)
    if any(key not in gold for key in pred):
        return False
    if gold == pred:
        return True
    if not gold:
        return False
    return all(key in pred and rouge_l(value, pred[key], language) >= threshold for key, value in gold.items())


def key_errors(label: Mapping[str, Any], predicted: Mapping[str, Any] | None) -> tuple[list[str], list[str]]:
    """(hallucinated keys: predicted but not in the label, missing keys: in the label but not predicted).

    Example:
        >>> key_errors({"a": "1", "b": "2"}, {"a": "1", "c": "3"})
        (['c'], ['b'])
    """
    gold, pred = _as_text(label), _as_text(predicted)
    return [k for k in pred if k not in gold], [k for k in gold if k not in pred]


class Prediction(BaseModel):
    """One snapshot answer, normalized: a call (name, arguments), no call, or an invalid call.

    Example:
        >>> Prediction.from_any('```\\n[{"name": "f", "arguments": {"a": 1}}]\\n```').name
        'f'
        >>> Prediction.from_any("[]").output
        'no_call'
    """

    output: OutputKind
    name: str | None = None
    arguments: dict[str, Any] | None = None

    @classmethod
    def from_any(cls, value: Any) -> Prediction:
        """Accepts raw model text, ``{"name", "arguments"}``, a list of calls, ``None``/``[]`` (no call),
        or ``{"invalid": reason}``."""
        if isinstance(value, Prediction):
            return value
        if value is None:
            return cls(output="no_call")
        if isinstance(value, str):
            parsed = parse_output(value)
            if parsed.tool_calls:
                first = parsed.tool_calls[0]
                return cls(output="call", name=first.name, arguments=dict(first.arguments))
            return cls(output="invalid" if parsed.kind == "invalid" else "no_call")
        if isinstance(value, list):
            return cls.from_any(value[0]) if value else cls(output="no_call")
        if isinstance(value, Mapping):
            if "invalid" in value:
                return cls(output="invalid", name=value.get("name"))
            if "output" in value and "name" not in value:
                return cls.model_validate(value)
            if "function" in value and isinstance(value["function"], Mapping):
                value = value["function"]
            name = value.get("name")
            args = value.get("arguments", value.get("parameters", {}))
            if isinstance(args, str):
                try:
                    args = json.loads(args) if args.strip() else {}
                except ValueError:
                    return cls(output="invalid", name=name if isinstance(name, str) else None)
            if not isinstance(name, str) or not isinstance(args, Mapping):
                return cls(output="invalid", name=name if isinstance(name, str) else None)
            return cls(output="call", name=name, arguments=dict(args))
        return cls(output="invalid")


class SnapshotScore(BaseModel):
    """How one snapshot was judged.

    Example:
        >>> score_snapshot(0, "f", {"a": "1"}, Prediction.from_any({"name": "f", "arguments": {}}), True).missing
        ['a']
    """

    index: int
    scored: bool
    expects_call: bool
    output: OutputKind
    name_ok: bool
    args_ok: bool
    correct: bool
    hallucinated: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)


class RecordScore(BaseModel):
    """How one conversation was judged: per-snapshot verdicts, Func.Acc, PR, SR.

    Example:
        >>> RecordScore(file="f", index=0, data_type="sQsA", kind="call", func_ok=True, snapshots=[],
        ...             scored=[], progress=1.0, success=False, correct_scored=0).progress
        1.0
    """

    file: str
    index: int
    id: Any = None
    data_type: str
    kind: str
    func_ok: bool
    snapshots: list[SnapshotScore]
    scored: list[int]
    progress: float
    success: bool
    correct_scored: int


def score_snapshot(index: int, label_name: str | None, label_args: Mapping[str, Any], prediction: Prediction,
                   scored: bool, language: Language = "en") -> SnapshotScore:
    """Judge one snapshot against its label (``label_name=None``: no call is the right answer)."""
    if label_name is None:
        ok = prediction.output == "no_call"
        return SnapshotScore(index=index, scored=scored, expects_call=False, output=prediction.output,
                             name_ok=ok, args_ok=ok, correct=ok)
    if prediction.output != "call":
        _, missing = key_errors(label_args, {})
        return SnapshotScore(index=index, scored=scored, expects_call=True, output=prediction.output,
                             name_ok=False, args_ok=False, correct=False, missing=missing)
    name_ok = prediction.name == label_name
    args_ok = arguments_correct(label_args, prediction.arguments, language)
    hallucinated, missing = key_errors(label_args, prediction.arguments)
    return SnapshotScore(index=index, scored=scored, expects_call=True, output="call", name_ok=name_ok,
                         args_ok=args_ok, correct=name_ok and args_ok, hallucinated=hallucinated, missing=missing)


def score_record(record: BenchRecord, predictions: Sequence[Any], language: Language = "en") -> RecordScore:
    """Judge a conversation; ``predictions`` has one answer per snapshot (missing ones count as no call)."""
    preds = [Prediction.from_any(p) for p in predictions]
    preds += [Prediction(output="no_call")] * (len(record.turns) - len(preds))
    scored = set(record.scored)
    snapshots = [score_snapshot(t.index, t.label.name, t.label.arguments, preds[t.index], t.index in scored, language)
                 for t in record.turns]
    first = snapshots[0]
    func_ok = first.name_ok if first.expects_call else first.correct
    flags = [snapshots[k].correct for k in record.scored]
    if not func_ok:
        progress, success = 0.0, False
    else:
        progress = flags.index(False) / len(flags) if False in flags else 1.0
        success = bool(flags) and all(flags)
    return RecordScore(file=record.file, index=record.index, id=record.id, data_type=record.data_type, kind=record.kind,
                       func_ok=func_ok, snapshots=snapshots, scored=list(record.scored), progress=progress,
                       success=success, correct_scored=sum(flags) if func_ok else 0)


class Metrics(BaseModel):
    """Aggregated metrics of a file, a data type, or a whole run (fractions in [0, 1]; ``None``: not defined).

    ``headline`` is the value the summary table shows: Acc, or for Irrelevant the share of
    correct refusals. ``no_call_acc`` is the share of snapshots labelled "no call" answered without
    a call (irrelevance, and intent-shift detection regardless of the first name).

    Example:
        >>> Metrics(acc=0.5, headline=0.5).pr is None
        True
    """

    records: int = 0
    snapshots: int = 0
    func_acc: float | None = None
    acc: float | None = None
    phr: float | None = None
    pmr: float | None = None
    pr: float | None = None
    sr: float | None = None
    phr_first: float | None = None
    pmr_first: float | None = None
    phr_last: float | None = None
    pmr_last: float | None = None
    no_call_acc: float | None = None
    headline: float | None = None


def _share(flags: Iterable[bool]) -> float | None:
    values = list(flags)
    return sum(values) / len(values) if values else None


def aggregate(scores: Sequence[RecordScore]) -> Metrics:
    """Pool record scores: snapshot-level rates over all scored snapshots, record-level over records."""
    if not scores:
        return Metrics()
    call_records = [s for s in scores if s.kind != "irrelevance"]
    metrics = Metrics(records=len(scores), snapshots=sum(len(s.scored) for s in scores))
    no_call = [snap.correct for s in scores for snap in s.snapshots if snap.scored and not snap.expects_call]
    metrics.no_call_acc = _share(no_call)
    if call_records:
        metrics.func_acc = _share(s.func_ok for s in call_records)
        total = sum(len(s.scored) for s in call_records)
        metrics.acc = sum(s.correct_scored for s in call_records) / total if total else None
        metrics.pr = sum(s.progress for s in call_records) / len(call_records)
        metrics.sr = _share(s.success for s in call_records)
        right = [s for s in call_records if s.func_ok]
        scored_calls = [snap for s in right for snap in s.snapshots if snap.scored and snap.expects_call]
        metrics.phr = _share(bool(snap.hallucinated) for snap in scored_calls)
        metrics.pmr = _share(bool(snap.missing) for snap in scored_calls)
        firsts = [s.snapshots[0] for s in right if s.snapshots[0].expects_call]
        lasts = [calls[-1] for s in right if (calls := [snap for snap in s.snapshots if snap.expects_call])]
        metrics.phr_first = _share(bool(snap.hallucinated) for snap in firsts)
        metrics.pmr_first = _share(bool(snap.missing) for snap in firsts)
        metrics.phr_last = _share(bool(snap.hallucinated) for snap in lasts)
        metrics.pmr_last = _share(bool(snap.missing) for snap in lasts)
    metrics.headline = metrics.acc if call_records else metrics.no_call_acc
    return metrics
