"""The metric of the Hammer paper's Table 3, as the authors' ``evaluation/evaluate.py`` computes it.

Per answer the prediction text is read as the authors read it: ```` ```json ```` and ```` ``` ````
removed, ``json.loads``, a ``{"tool_calls": [...]}`` object unwrapped, ``null`` as ``[]``. Text that
does not parse, or parses to something other than a list, counts as **one predicted call and
nothing correct**. Then, over the whole set:

* **API level**: a predicted call is correct when its name is among the gold calls' names.
  P = correct / predicted calls, R = correct / gold calls, F1 their harmonic mean.
* **Argument level**: arguments are compared as ``str(value)``, empty strings dropped. For a
  correct call, the gold call of the same name that first matches at least one argument counts its
  matched arguments (a gold call with no arguments, predicted with none, counts one). P = matched /
  predicted non-empty arguments, R = matched / gold non-empty arguments, F1.

A level whose counts include a zero gets no scores (``None``), as the authors' script prints none.
``tests/unit/test_academic.py`` checks this module against an independent implementation of the
same rules and against hand-computed cases.

Example:
    >>> gold = [{"name": "getTime", "arguments": {"city": "Paris"}}]
    >>> score = score_answers([('```\\n[{"name": "getTime", "arguments": {"city": "Paris"}}]\\n```', gold)])
    >>> score.f1_api, score.f1_args
    (1.0, 1.0)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

PAPER_ROWS: dict[str, dict[str, tuple[float, float]]] = {
    "Qwen2-1.5B-Instruct (Prompt)": {"apibank_l1": (74.63, 63.55), "apibank_l2": (57.69, 33.62),
                                     "toolalpaca": (65.76, 45.25), "sealtool": (82.08, 75.49)},
    "Hammer-1.5B": {"apibank_l1": (82.13, 72.30), "apibank_l2": (79.82, 59.71), "toolalpaca": (80.90, 53.48),
                    "sealtool": (95.59, 88.65)},
    "Hammer-7B": {"apibank_l1": (93.48, 85.79), "apibank_l2": (82.91, 66.40), "toolalpaca": (82.31, 59.86),
                  "sealtool": (97.44, 91.66)},
}
"""Published figures (Hammer paper, Table 3): (F1 Func-Name, F1 Func.+Args) in percent per set."""


class SetScore(BaseModel):
    """The counts and the P/R/F1 of one set at API level and argument level (fractions, not percent).

    Example:
        >>> SetScore(answers=1, gold_calls=1, predicted_calls=1, correct_calls=1).finish().f1_api
        1.0
    """

    answers: int = 0
    gold_calls: int = 0
    predicted_calls: int = 0
    correct_calls: int = 0
    gold_args: int = 0
    predicted_args: int = 0
    correct_args: int = 0
    format_errors: int = 0
    p_api: float | None = None
    r_api: float | None = None
    f1_api: float | None = None
    p_args: float | None = None
    r_args: float | None = None
    f1_args: float | None = None

    def finish(self) -> SetScore:
        """The scores from the counts."""
        self.p_api, self.r_api, self.f1_api = _prf(self.correct_calls, self.predicted_calls, self.gold_calls)
        self.p_args, self.r_args, self.f1_args = _prf(self.correct_args, self.predicted_args, self.gold_args)
        return self


def _prf(correct: int, predicted: int, gold: int) -> tuple[float | None, float | None, float | None]:
    if correct * predicted * gold == 0:
        return None, None, None
    precision, recall = correct / predicted, correct / gold
    return precision, recall, 2 * precision * recall / (precision + recall)


def parse_answer(text: str) -> list[Any] | None:
    """The call list in a model's answer, read as the authors' evaluator reads it; None when it does not parse.

    Example:
        >>> parse_answer('```json\\n[]\\n```'), parse_answer("Sure! [..."), parse_answer('{"tool_calls": null}')
        ([], None, [])
    """
    try:
        value = json.loads(text.replace("```json", "").replace("```", ""))
    except ValueError:
        return None
    if isinstance(value, dict) and "tool_calls" in value:
        value = value["tool_calls"]
    if value is None:
        return []
    return value if isinstance(value, list) else None


def _filled(arguments: Any) -> dict[str, str]:
    return {k: str(v) for k, v in arguments.items() if v != ""} if isinstance(arguments, Mapping) else {}


def _matched_arguments(gold: Mapping[str, Any], predicted: Any) -> int:
    """Gold arguments the prediction has with an equal value (``str``), empty ones aside; 1 for a call
    with no arguments predicted with none (the authors' rule)."""
    if not gold and gold == predicted:
        return 1
    if not isinstance(predicted, Mapping):
        return 0
    wanted, given = _filled(gold), _filled(predicted)
    if not gold and wanted == given:
        return 1
    return sum(1 for key, value in wanted.items() if key in given and given[key] == value)


def score_answers(answers: Iterable[tuple[str, Sequence[Mapping[str, Any]]]]) -> SetScore:
    """Score ``(prediction text, gold calls)`` pairs of one set."""
    score = SetScore()
    for text, gold in answers:
        score.answers += 1
        score.gold_calls += len(gold)
        score.gold_args += sum(len(_filled(call.get("arguments", {}))) for call in gold)
        predicted = parse_answer(text)
        if predicted is None:
            score.predicted_calls += 1
            score.format_errors += 1
            continue
        names = [call.get("name") for call in gold]
        for call in predicted:
            score.predicted_calls += 1
            if not isinstance(call, Mapping):
                continue
            score.predicted_args += len(_filled(call.get("arguments", {})))
            if call.get("name") not in names:
                continue
            score.correct_calls += 1
            for candidate in gold:
                if candidate.get("name") == call.get("name"):
                    matched = _matched_arguments(candidate.get("arguments", {}), call.get("arguments"))
                    if matched:
                        score.correct_args += matched
                        break
    return score.finish()


def gold_answer_text(gold: Sequence[Mapping[str, Any]]) -> str:
    """The gold calls written as Hammer writes an answer (a fence around a one-line list).

    Example:
        >>> gold_answer_text([{"name": "f", "arguments": {}}])
        '```\\n[{"name": "f", "arguments": {}}]\\n```'
    """
    return "```\n" + json.dumps([dict(call) for call in gold], ensure_ascii=False) + "\n```"
