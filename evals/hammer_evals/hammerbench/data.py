"""HammerBench data: files, data types, and each conversation split into labelled snapshots.

A multi-turn record is ``user``, ``function call`` (the snapshot label), ``assistant`` (a follow-up
question, or ``"success"``) repeated; in the intent-shift (IS) file the last user turn is labelled
with the termination text instead of a call. A single-turn record is one user turn and its call;
in the ``ir_*`` files the labelled tool is missing from the candidates, so the right answer is no
call. Each snapshot's prompt history holds the user and assistant turns so far (never the earlier
labels), and the tools are the 5 candidates at the first turn and only the gold tool afterwards,
as in the authors' ``inference.py``.

Example:
    >>> spec = FILE_SPECS["HammerBench_SO_case1"]
    >>> spec.data_type, spec.mode
    ('SO', 'mid')
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from hammer_plugins.output.response import DEFAULT_REFUSAL_TEXT
from hammer_plugins.tools.definition import Tool, to_tool

from ..datasets import find_json, read_json

ScoringMode = Literal["all", "last", "mid"]
RecordKind = Literal["call", "irrelevance", "intent_shift"]
TERMINATION_TEXT = DEFAULT_REFUSAL_TEXT
"""HammerBench's termination label; the engine's default refusal text is this very text."""


class FileSpec(BaseModel):
    """How one HammerBench file is scored.

    ``mode``: ``all`` snapshots, the ``last`` one (IS), or the ``mid`` ids listed in
    ``snapshot_id/`` (SO, External). ``kind`` says what the labels expect.

    Example:
        >>> FILE_SPECS["ir_ST_Perfect"].kind
        'irrelevance'
    """

    stem: str
    data_type: str
    turns: Literal["single", "multi"]
    kind: RecordKind = "call"
    mode: ScoringMode = "all"
    snapshot_ids: str | None = None

    @property
    def relative_path(self) -> str:
        folder = "single-turn" if self.turns == "single" else "multi-turn"
        return f"{folder}/{self.stem}.json"


def _spec(stem: str, data_type: str, turns: Literal["single", "multi"], kind: RecordKind = "call",
          mode: ScoringMode = "all", ids: str | None = None) -> FileSpec:
    return FileSpec(stem=stem, data_type=data_type, turns=turns, kind=kind, mode=mode, snapshot_ids=ids)


FILE_SPECS: dict[str, FileSpec] = {s.stem: s for s in [
    _spec("ST_Perfect", "Perfect", "single"),
    _spec("ST_Imperfect", "Imperfect", "single"),
    _spec("ST_External", "External (ST)", "single"),
    _spec("ir_ST_Perfect", "Irrelevant", "single", "irrelevance"),
    _spec("ir_ST_Imperfect", "Irrelevant", "single", "irrelevance"),
    _spec("ir_ST_External", "Irrelevant", "single", "irrelevance"),
    _spec("HammerBench_Based", "sQsA", "multi"),
    _spec("HammerBench_mQmA", "mQmA", "multi"),
    _spec("HammerBench_mQsA", "mQsA", "multi"),
    _spec("HammerBench_sQmA", "sQmA", "multi"),
    _spec("HammerBench_SO_case1", "SO", "multi", mode="mid", ids="snap_shot_id_SO_case1.json"),
    _spec("HammerBench_SO_case2", "SO", "multi", mode="mid", ids="snap_shot_id_SO_case2.json"),
    _spec("HammerBench_mSv", "mSv", "multi"),
    _spec("HammerBench_External", "External (MT)", "multi", mode="mid", ids="snap_shot_id_External.json"),
    _spec("HammerBench_IS", "IS", "multi", "intent_shift", mode="last"),
]}
"""Every English HammerBench file, in the order of the paper's tables."""

DATA_TYPES: tuple[str, ...] = tuple(dict.fromkeys(s.data_type for s in FILE_SPECS.values()))
"""The table columns: single-turn Perfect, Imperfect, External, Irrelevant; multi-turn sQsA ... IS."""

# HammerBench's schemas use some Python type names; JSON Schema (and the engine) needs these.
_TYPE_FIXES = {"float": "number", "int": "integer", "str": "string", "bool": "boolean", "list": "array",
               "dict": "object", "double": "number"}


class LabelCall(BaseModel):
    """A snapshot label: a call, or ``name=None`` when no call is the right answer.

    Example:
        >>> LabelCall(name=None).expects_call
        False
    """

    name: str | None
    arguments: dict[str, Any] = Field(default_factory=dict)

    @property
    def expects_call(self) -> bool:
        return self.name is not None


class BenchTurn(BaseModel):
    """One snapshot to predict: the history so far, the tools shown, and the label.

    Example:
        >>> BenchTurn(index=0, history=[{"role": "user", "content": "hi"}], tools=[],
        ...           label=LabelCall(name="f", arguments={"a": "1"})).label.expects_call
        True
    """

    index: int
    history: list[dict[str, str]]
    tools: list[dict[str, Any]]
    label: LabelCall


class BenchRecord(BaseModel):
    """One conversation (or single-turn query) with its snapshots and the ids that are scored.

    Example:
        >>> rec = BenchRecord(file="ST_Perfect", index=0, data_type="Perfect", kind="call", turns=[
        ...     BenchTurn(index=0, history=[{"role": "user", "content": "hi"}], tools=[],
        ...               label=LabelCall(name="f"))], scored=[0])
        >>> rec.n_snapshots
        1
    """

    file: str
    index: int
    id: Any = None
    data_type: str
    kind: RecordKind
    turns: list[BenchTurn]
    scored: list[int]

    @property
    def n_snapshots(self) -> int:
        return len(self.turns)


def fix_tool_schema(tool: dict[str, Any]) -> dict[str, Any]:
    """A HammerBench tool with Python type names (``float``) mapped to JSON Schema types.

    Example:
        >>> fix_tool_schema({"name": "f", "parameters": {"type": "object", "properties": {
        ...     "x": {"type": "float"}}}})["parameters"]["properties"]["x"]["type"]
        'number'
    """
    fixed = copy.deepcopy(tool)

    def walk(schema: Any) -> None:
        if not isinstance(schema, dict):
            return
        kind = schema.get("type")
        if isinstance(kind, str) and kind in _TYPE_FIXES:
            schema["type"] = _TYPE_FIXES[kind]
        for sub in (schema.get("properties") or {}).values():
            walk(sub)
        walk(schema.get("items"))

    walk(fixed.get("parameters"))
    return fixed


def to_bench_tools(tools: Iterable[dict[str, Any]]) -> list[Tool]:
    """HammerBench tool dicts as engine :class:`Tool` objects."""
    return [to_tool(fix_tool_schema(t)) for t in tools]


def resolve_file(data_dir: str | Path, stem: str) -> Path:
    """The path of ``stem`` under ``data_dir`` (the ``en`` folder, or a folder holding the file itself).

    Either spelling is found: ``<stem>.json`` or the compressed ``<stem>.json.gz``.
    """
    root = Path(data_dir)
    spec = FILE_SPECS.get(stem)
    candidates = [root / spec.relative_path, root / "en" / spec.relative_path] if spec else []
    for path in [*candidates, root / f"{stem}.json"]:
        found = find_json(path)
        if found is not None:
            return found
    raise FileNotFoundError(f"HammerBench file {stem!r} not found under {str(root)!r}. Fix: pass --data the "
                            "folder holding single-turn/ and multi-turn/ (e.g. .../hammerbench/en)")


def available_files(data_dir: str | Path, files: Sequence[str] | None = None) -> list[str]:
    """The file stems to evaluate: ``files`` (names, stems or data types), else every file present.

    Example:
        >>> available_files("/nonexistent", ["SO"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        FileNotFoundError: HammerBench file 'HammerBench_SO_case1' not found under '/nonexistent'...
    """
    if files:
        stems = expand_names(files)
        for stem in stems:
            resolve_file(data_dir, stem)
        return stems
    present = []
    for stem in FILE_SPECS:
        try:
            resolve_file(data_dir, stem)
        except FileNotFoundError:
            continue
        present.append(stem)
    if not present:
        raise FileNotFoundError(f"no HammerBench files under {str(data_dir)!r}. Fix: pass --data the folder holding "
                                "single-turn/ and multi-turn/ (e.g. .../hammerbench/en)")
    return present


def expand_names(names: Iterable[str]) -> list[str]:
    """File stems for names given as stems, file names, short names (``Based``, ``SO_case1``) or data types.

    Example:
        >>> expand_names(["SO", "Based", "ST_Perfect.json"])
        ['HammerBench_SO_case1', 'HammerBench_SO_case2', 'HammerBench_Based', 'ST_Perfect']
    """
    stems: list[str] = []
    for name in names:
        stems.extend(_expand(name))
    return list(dict.fromkeys(stems))


def _expand(name: str) -> list[str]:
    stem = Path(name).name.removesuffix(".json")
    if stem in FILE_SPECS:
        return [stem]
    if f"HammerBench_{stem}" in FILE_SPECS:
        return [f"HammerBench_{stem}"]
    aliases = {"Based": "sQsA", "External": "External (MT)", "ST_External": "External (ST)"}
    wanted = aliases.get(stem, stem)
    matches = [s.stem for s in FILE_SPECS.values() if s.data_type.lower() == wanted.lower()]
    if not matches:
        known = ", ".join([*FILE_SPECS, *DATA_TYPES])
        raise ValueError(f"unknown HammerBench file or data type {name!r}. Fix: use one of {known}")
    return matches


def load_file(data_dir: str | Path, stem: str, limit: int | None = None, mode: ScoringMode | None = None) -> list[BenchRecord]:
    """Load ``stem`` as records of labelled snapshots (the first ``limit`` records).

    ``mode`` overrides the file's scoring mode (``"all"`` scores every snapshot everywhere).
    """
    spec = FILE_SPECS.get(stem)
    if spec is None:
        raise ValueError(f"unknown HammerBench file {stem!r}; known: {', '.join(FILE_SPECS)}")
    path = resolve_file(data_dir, stem)
    data = read_json(path)
    if limit is not None:
        data = data[:limit]
    chosen_mode = mode or spec.mode
    ids: list[list[int]] | None = None
    if chosen_mode == "mid":
        if spec.snapshot_ids is None:
            chosen_mode = "all"
        else:
            ids_path = path.parent / "snapshot_id" / spec.snapshot_ids
            if find_json(ids_path) is None:
                raise FileNotFoundError(f"{stem} is scored at the snapshots listed in {ids_path}, which is missing. "
                                        "Fix: keep multi-turn/snapshot_id/ next to the data, or pass --mode all")
            ids = read_json(ids_path)
    records = []
    for index, raw in enumerate(data):
        turns = _split_turns(raw, spec)
        scored = _scored_ids(chosen_mode, len(turns), ids[index] if ids is not None else None, stem)
        records.append(BenchRecord(file=stem, index=index, id=raw.get("id"), data_type=spec.data_type,
                                   kind=spec.kind, turns=turns, scored=scored))
    return records


def _split_turns(raw: dict[str, Any], spec: FileSpec) -> list[BenchTurn]:
    messages = raw["messages"]
    candidates = raw.get("multiple_tools") or []
    gold = raw.get("single_tool") or candidates
    history: list[dict[str, str]] = []
    turns: list[BenchTurn] = []
    for position, message in enumerate(messages):
        role = message["role"]
        if role == "function call":
            continue
        history.append({"role": role, "content": str(message["content"])})
        if role != "user":
            continue
        following = messages[position + 1] if position + 1 < len(messages) else None
        if following is not None and following["role"] == "function call":
            content = following["content"]
            label = LabelCall(name=content["name"], arguments=dict(content.get("arguments") or {}))
        else:
            # The intent-shift turn: labelled with the termination text, i.e. no call.
            label = LabelCall(name=None)
        if spec.kind == "irrelevance":
            label = LabelCall(name=None, arguments={})
        tools = candidates if not turns else gold
        turns.append(BenchTurn(index=len(turns), history=[dict(h) for h in history], tools=tools, label=label))
    if not turns:
        raise ValueError(f"a {spec.stem} record has no user turn: {json.dumps(raw)[:200]}")
    return turns


def _scored_ids(mode: ScoringMode, n: int, listed: list[int] | None, stem: str) -> list[int]:
    if mode == "all":
        return list(range(n))
    if mode == "last":
        return [n - 1]
    assert listed is not None
    ids = list(listed)
    if stem == "HammerBench_SO_case2":
        # As the authors' evaluate.py does for case 2 (the override is a turn of its own): score
        # the override turn and the one after it, where the new value must persist.
        ids = ids * 2
        ids[1] += 1
    return [i for i in ids if 0 <= i < n]


def label_calls(record: BenchRecord) -> list[dict[str, Any] | None]:
    """The labels as predictions (a perfect system's answers): a call, or ``None`` for no call."""
    return [{"name": t.label.name, "arguments": t.label.arguments} if t.label.expects_call else None
            for t in record.turns]
