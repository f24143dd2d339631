"""The Hammer paper's academic evaluation: API-Bank L-1/L-2, Tool-Alpaca, Seal-Tools, and the masking case study.

``hammer eval academic`` runs a model on the sets shipped in the package (or ``--data`` a folder of
your own, or ``--download`` the upstream files; any backend, constrained or not, masking on or
off) or scores a predictions file, and reports P/R/F1 of function names and of names with
arguments per set, laid out like the paper's Table 3 with the published rows beside.

Example:
    >>> from hammer_evals.academic import score_answers
    >>> score_answers([("[]", [{"name": "f", "arguments": {}}])]).r_api is None   # nothing predicted
    True
"""

from __future__ import annotations

from .data import SETS, AcademicEntry, convert_tool, load_set
from .evaluation import AcademicResult, Answer, Variant, answer_text, engine_answer, evaluate, evaluate_entries
from .masking import mask_entry
from .metrics import PAPER_ROWS, SetScore, gold_answer_text, parse_answer, score_answers

__all__ = [
    "PAPER_ROWS",
    "SETS",
    "AcademicEntry",
    "AcademicResult",
    "Answer",
    "SetScore",
    "Variant",
    "answer_text",
    "convert_tool",
    "engine_answer",
    "evaluate",
    "evaluate_entries",
    "gold_answer_text",
    "load_set",
    "mask_entry",
    "parse_answer",
    "score_answers",
]
