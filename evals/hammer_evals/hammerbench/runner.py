"""Run a model over HammerBench snapshots, and read or write predictions files.

Each snapshot is predicted independently from the gold history (the user and assistant turns so
far), exactly as the authors' ``inference.py`` does, so one wrong answer does not change the next
prompt. The call goes through the engine's one pipeline (``engine.generate(...,
parallel_tool_calls=False, partial_calls=True)``): the Hammer prompt, a grammar allowing one call
or ``[]``, and (by default) every parameter optional, so a partial snapshot is expressible.

Predictions file (JSON Lines, one record a line)::

    {"file": "HammerBench_Based", "index": 0, "predictions": [<answer per snapshot>, ...]}

An answer is the raw model text (parsed with the engine's parser), ``{"name", "arguments"}``, a
list of calls (the first is used), ``null`` or ``[]`` (no call), or ``{"invalid": reason}``.

Snapshot journal (JSON Lines, one finished snapshot a line; what lets a run resume mid-record)::

    {"file": "HammerBench_Based", "index": 0, "turn": 2, "prediction": <SnapshotPrediction>}

Run order: every snapshot is an independent prompt, and llama.cpp keeps the previous call's KV
cache and evaluates only what follows the longest common prefix with the previous prompt. Running
the snapshots sorted by prompt text (``order="prefix"``, :func:`schedule_snapshots`) puts prompts
sharing a tools block and a history next to each other: on the 3,535 snapshots of the 100-record
files it cuts the prompt text to evaluate from 4.45M to 1.72M characters.

Example:
    >>> RunnerConfig().layout
    'transcript'
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal, NamedTuple

from pydantic import BaseModel, Field

from hammer_plugins.engine import HammerEngine
from hammer_plugins.slot_filling.snapshots import Layout, snapshot_messages
from hammer_plugins.slot_filling.values import is_grounded
from hammer_plugins.tools.definition import Tool
from hammer_plugins.values.messages import Message

from .data import BenchRecord, BenchTurn, to_bench_tools


class RunnerConfig(BaseModel):
    """How snapshots are asked for.

    ``layout``: ``"transcript"`` (default; the history as ``role:content`` lines in one user turn,
    the authors' layout) or ``"chat"`` (one turn per message). ``hint``: an instruction shown
    before the history (off by default: the authors' Hammer prompt has none). ``relax_required``:
    every parameter optional in the grammar. ``mask_names``: override the engine's masking.
    ``ground_values``: drop argument values with no support in the user's turns so far (the
    :class:`~hammer_plugins.slot_filling.filler.SlotFiller` grounding rule), measuring model plus rules.
    ``order``: ``"prefix"`` (default) runs the snapshots sorted by prompt text, so consecutive
    prompts share long prefixes the backend's KV cache can reuse; ``"data"`` runs them file by file,
    record by record, turn by turn. The prompts are the same either way; only the speed differs.

    Example:
        >>> RunnerConfig(layout="chat", relax_required=False).relax_required
        False
        >>> RunnerConfig().order
        'prefix'
    """

    layout: Layout = "transcript"
    hint: str | None = None
    relax_required: bool = True
    mask_names: bool | None = None
    max_tokens: int | None = None
    ground_values: bool = False
    order: Literal["prefix", "data"] = "prefix"


class SnapshotPrediction(BaseModel):
    """One model answer: the call (real names), or none, with the raw text and its cost.

    ``reused``: the same prompt was already answered in this run (greedy decoding gives the same
    answer), so this copy cost nothing and ``seconds`` is 0.

    Example:
        >>> SnapshotPrediction(output="no_call", raw="[]").answer is None
        True
    """

    output: Literal["call", "no_call", "invalid"]
    call: dict[str, Any] | None = None
    reason: str | None = None
    raw: str = ""
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reused: bool = False
    asked: bool = False  # the engine's ask-or-call rule held the call back: ``call`` is its pending call

    @property
    def answer(self) -> Any:
        """What the predictions file stores for scoring."""
        if self.output == "call":
            return self.call
        if self.output == "invalid":
            return {"invalid": self.reason or "invalid output"}
        return None


class RecordPrediction(BaseModel):
    """A record's answers, one per snapshot, as a predictions-file line.

    Example:
        >>> RecordPrediction(file="ST_Perfect", index=0, predictions=["[]"]).seconds
        0
    """

    file: str
    index: int
    id: Any = None
    predictions: list[Any]
    details: list[SnapshotPrediction] = Field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(d.seconds for d in self.details)


def turn_messages(turn: BenchTurn) -> list[Message]:
    """The gold history of a snapshot as engine messages."""
    return [Message(role="assistant" if h["role"] == "assistant" else "user", content=h["content"])
            for h in turn.history]


def _turn_inputs(turn: BenchTurn, config: RunnerConfig) -> tuple[list[Message], list[Tool]]:
    # One place builds what a snapshot shows, so snapshot_prompt and predict_turn cannot drift apart.
    return snapshot_messages(turn_messages(turn), config.layout, config.hint), to_bench_tools(turn.tools)


def snapshot_prompt(engine: HammerEngine, turn: BenchTurn, config: RunnerConfig | None = None) -> str:
    """The exact prompt text :func:`predict_turn` sends for ``turn`` (what the run order sorts on).

    Example:
        >>> from hammer_plugins.backends.scripted import ScriptedBackend
        >>> from hammer_evals.hammerbench.data import BenchTurn, LabelCall
        >>> turn = BenchTurn(index=0, history=[{"role": "user", "content": "hi"}], label=LabelCall(name=None), tools=[
        ...     {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}])
        >>> prompt = snapshot_prompt(HammerEngine(backend=ScriptedBackend()), turn)
        >>> prompt.endswith("user:hi<|im_end|>\\n<|im_start|>assistant\\n")
        True
    """
    config = config or RunnerConfig()
    messages, tools = _turn_inputs(turn, config)
    # The same call predict_turn makes: tool_choice "auto", the runner's masking override.
    return engine.render(messages, tools, "auto", config.mask_names)


def predict_turn(engine: HammerEngine, turn: BenchTurn, config: RunnerConfig | None = None) -> SnapshotPrediction:
    """Ask the engine for one snapshot."""
    config = config or RunnerConfig()
    messages, tools = _turn_inputs(turn, config)
    started = time.perf_counter()
    # One raw snapshot: at most one call, [] allowed, a partial call well-formed (the slot filler's
    # call, without its rules: the benchmark scores the model's snapshot).
    response = engine.generate(messages, tools, "auto", mask_names=config.mask_names, parallel_tool_calls=False,
                               partial_calls=config.relax_required, on_refusal="message", max_tokens=config.max_tokens)
    seconds = time.perf_counter() - started
    common = {"raw": response.raw, "seconds": seconds, "prompt_tokens": response.usage.prompt_tokens,
              "completion_tokens": response.usage.completion_tokens}
    if response.pending_calls:
        # The engine's ask-or-call rule (--on-missing ask) held the call back and asked for the rest: the
        # snapshot is the call with the values that stand, as HammerBench labels a turn that leaves slots out.
        held = response.pending_calls[0]
        return SnapshotPrediction(output="call", call={"name": held.name, "arguments": dict(held.arguments)},
                                  asked=True, **common)
    if response.tool_calls:
        first = response.tool_calls[0]
        arguments = dict(first.arguments)
        if config.ground_values:
            said = "\n".join(h["content"] for h in turn.history if h["role"] == "user")
            arguments = {k: v for k, v in arguments.items() if is_grounded(v, said)}
        return SnapshotPrediction(output="call", call={"name": first.name, "arguments": arguments}, **common)
    if response.kind == "invalid":
        reasons = "; ".join(c.reason for c in response.invalid_tool_calls) or "invalid output"
        return SnapshotPrediction(output="invalid", reason=reasons, **common)
    return SnapshotPrediction(output="no_call", **common)


def predict_record(engine: HammerEngine, record: BenchRecord, config: RunnerConfig | None = None,
                   on_snapshot: Callable[[SnapshotPrediction], None] | None = None) -> RecordPrediction:
    """Predict every snapshot of a record (each from the gold history)."""
    details = []
    for turn in record.turns:
        prediction = predict_turn(engine, turn, config)
        details.append(prediction)
        if on_snapshot is not None:
            on_snapshot(prediction)
    return record_prediction(record, details)


def record_prediction(record: BenchRecord, details: Sequence[SnapshotPrediction]) -> RecordPrediction:
    """A record's predictions-file line from its snapshot answers, in turn order.

    Example:
        >>> from hammer_evals.hammerbench.data import BenchTurn, LabelCall
        >>> rec = BenchRecord(file="ST_Perfect", index=0, data_type="Perfect", kind="call", scored=[0],
        ...                   turns=[BenchTurn(index=0, history=[{"role": "user", "content": "hi"}], tools=[],
        ...                                    label=LabelCall(name=None))])
        >>> record_prediction(rec, [SnapshotPrediction(output="no_call", raw="[]")]).predictions
        [None]
    """
    return RecordPrediction(file=record.file, index=record.index, id=record.id,
                            predictions=[d.answer for d in details], details=list(details))


class ScheduledSnapshot(NamedTuple):
    """One snapshot to run: its record, its turn index, and the prompt it will send."""

    record: BenchRecord
    turn: int
    prompt: str


def schedule_snapshots(engine: HammerEngine, records: Sequence[BenchRecord], config: RunnerConfig | None = None,
                       done: Mapping[tuple[str, int], Iterable[int]] | None = None) -> list[ScheduledSnapshot]:
    """The snapshots still to run, in the order ``config.order`` asks for.

    ``done`` maps (file, record index) to turns already answered, which are left out. ``"data"``
    keeps file, record, turn order; ``"prefix"`` sorts by :func:`snapshot_prompt` (stable: equal
    prompts keep data order), so each prompt shares the longest prefix with the one before it and
    llama.cpp re-evaluates only the rest.

    Example:
        >>> from hammer_plugins.backends.scripted import ScriptedBackend
        >>> from hammer_evals.hammerbench.data import BenchTurn, LabelCall
        >>> tools = [{"name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}}]
        >>> rec = BenchRecord(file="ST_Perfect", index=0, data_type="Perfect", kind="call", scored=[0, 1], turns=[
        ...     BenchTurn(index=0, history=[{"role": "user", "content": "b"}], tools=tools, label=LabelCall(name=None)),
        ...     BenchTurn(index=1, history=[{"role": "user", "content": "a"}], tools=tools, label=LabelCall(name=None))])
        >>> engine = HammerEngine(backend=ScriptedBackend())
        >>> [job.turn for job in schedule_snapshots(engine, [rec])]
        [1, 0]
        >>> [job.turn for job in schedule_snapshots(engine, [rec], RunnerConfig(order="data"))]
        [0, 1]
        >>> [job.turn for job in schedule_snapshots(engine, [rec], done={("ST_Perfect", 0): [0]})]
        [1]
    """
    config = config or RunnerConfig()
    finished = {key: set(turns) for key, turns in (done or {}).items()}
    jobs = [ScheduledSnapshot(record, number, snapshot_prompt(engine, record.turns[number], config))
            for record in records for number in range(record.n_snapshots)
            if number not in finished.get((record.file, record.index), ())]
    if config.order == "data":
        return jobs
    # sorted() is stable, so identical prompts keep data order and the schedule is deterministic.
    return sorted(jobs, key=lambda job: job.prompt)


class JournalEntry(BaseModel):
    """One line of the snapshot journal: a finished snapshot of a record not yet complete.

    Example:
        >>> JournalEntry(file="ST_Perfect", index=0, turn=0, prediction=SnapshotPrediction(output="no_call")).turn
        0
    """

    file: str
    index: int
    turn: int
    prediction: SnapshotPrediction


def write_snapshot(stream: IO[str], entry: JournalEntry) -> None:
    """Append one journal line (flushed: a killed run loses at most the snapshot in flight)."""
    stream.write(json.dumps(entry.model_dump(mode="json"), ensure_ascii=False) + "\n")
    stream.flush()


def load_journal(path: str | Path) -> dict[tuple[str, int], dict[int, SnapshotPrediction]]:
    """Read a snapshot journal: (file stem, record index) -> turn index -> answer (a later line wins).

    A last line cut short (the run was killed while writing it) is skipped; any other bad line is
    an error.

    Example:
        >>> import tempfile, os
        >>> with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        ...     _ = f.write('{"file": "ST_Perfect", "index": 0, "turn": 1, "prediction": {"output": "no_call"}}\\n{"file": "ST')
        >>> load_journal(f.name)[("ST_Perfect", 0)][1].output
        'no_call'
        >>> os.unlink(f.name)
    """
    text = Path(path).read_text(encoding="utf-8")
    lines = text.split("\n")
    out: dict[tuple[str, int], dict[int, SnapshotPrediction]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = JournalEntry.model_validate_json(line)
        except ValueError as exc:
            if number == len(lines):  # no newline after it: the write was interrupted
                continue
            raise ValueError(f"{path}:{number}: not a journal line ({exc}). Fix: delete the line, or run without "
                             "--resume") from exc
        out.setdefault((entry.file, entry.index), {})[entry.turn] = entry.prediction
    return out


def write_prediction(stream: IO[str], prediction: RecordPrediction) -> None:
    """Append one predictions-file line (flushed, so an interrupted run keeps what it did)."""
    stream.write(json.dumps(prediction.model_dump(mode="json"), ensure_ascii=False) + "\n")
    stream.flush()


def load_predictions(path: str | Path) -> dict[tuple[str, int], RecordPrediction]:
    """Read a predictions file (JSON Lines, or one JSON list) keyed by (file stem, record index).

    Example:
        >>> import tempfile, os
        >>> with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        ...     _ = f.write('{"file": "ST_Perfect", "index": 0, "predictions": ["[]"]}\\n')
        >>> load_predictions(f.name)[("ST_Perfect", 0)].predictions
        ['[]']
        >>> os.unlink(f.name)
    """
    text = Path(path).read_text(encoding="utf-8")
    stripped = text.lstrip()
    items: Iterable[Any]
    if stripped.startswith("["):
        items = json.loads(stripped)
    else:
        items = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not a JSON line ({exc}). Fix: one JSON object per line") from exc
    out: dict[tuple[str, int], RecordPrediction] = {}
    for item in items:
        if not isinstance(item, Mapping) or "file" not in item or "index" not in item or "predictions" not in item:
            raise ValueError(f"{path}: each line needs 'file', 'index' and 'predictions', got {str(item)[:200]}")
        stem = Path(str(item["file"])).name.removesuffix(".json")
        record = RecordPrediction(file=stem, index=int(item["index"]), id=item.get("id"),
                                  predictions=list(item["predictions"]),
                                  details=[SnapshotPrediction.model_validate(d) for d in item.get("details") or []])
        out[(record.file, record.index)] = record
    return out


def labels_as_predictions(records: Sequence[BenchRecord]) -> list[RecordPrediction]:
    """A perfect system's predictions: each label as the answer (no call where none is expected)."""
    from .data import label_calls

    return [RecordPrediction(file=r.file, index=r.index, id=r.id, predictions=label_calls(r)) for r in records]
