"""Run a model over HammerBench snapshots, and read or write predictions files.

Each snapshot is predicted independently from the gold history (the user and assistant turns so
far), exactly as the authors' ``inference.py`` does, so one wrong answer does not change the next
prompt. The call goes through :func:`hammer_plugins.snapshots.snapshot_generate`: the engine's
Hammer prompt, a grammar allowing one call or ``[]``, and (by default) every parameter optional,
so a partial snapshot is expressible.

Predictions file (JSON Lines, one record a line)::

    {"file": "HammerBench_Based", "index": 0, "predictions": [<answer per snapshot>, ...]}

An answer is the raw model text (parsed with the engine's parser), ``{"name", "arguments"}``, a
list of calls (the first is used), ``null`` or ``[]`` (no call), or ``{"invalid": reason}``.

Example:
    >>> RunnerConfig().layout
    'transcript'
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import BaseModel, Field

from ..engine import HammerEngine
from ..messages import Message
from ..snapshots import Layout, is_grounded, snapshot_generate, snapshot_messages
from .data import BenchRecord, BenchTurn, to_bench_tools


class RunnerConfig(BaseModel):
    """How snapshots are asked for.

    ``layout``: ``"transcript"`` (default; the history as ``role:content`` lines in one user turn,
    the authors' layout) or ``"chat"`` (one turn per message). ``hint``: an instruction shown
    before the history (off by default: the authors' Hammer prompt has none). ``relax_required``:
    every parameter optional in the grammar. ``mask_names``: override the engine's masking.
    ``ground_values``: drop argument values with no support in the user's turns so far (the
    :class:`~hammer_plugins.snapshots.SlotFiller` grounding rule), measuring model plus rules.

    Example:
        >>> RunnerConfig(layout="chat", relax_required=False).relax_required
        False
    """

    layout: Layout = "transcript"
    hint: str | None = None
    relax_required: bool = True
    mask_names: bool | None = None
    max_tokens: int | None = None
    ground_values: bool = False


class SnapshotPrediction(BaseModel):
    """One model answer: the call (real names), or none, with the raw text and its cost.

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


def predict_turn(engine: HammerEngine, turn: BenchTurn, config: RunnerConfig | None = None) -> SnapshotPrediction:
    """Ask the engine for one snapshot."""
    config = config or RunnerConfig()
    tools = to_bench_tools(turn.tools)
    messages = snapshot_messages(turn_messages(turn), config.layout, config.hint)
    started = time.perf_counter()
    response = snapshot_generate(engine, messages, tools, mask_names=config.mask_names,
                                 relax_required=config.relax_required, max_tokens=config.max_tokens)
    seconds = time.perf_counter() - started
    common = {"raw": response.raw, "seconds": seconds, "prompt_tokens": response.usage.prompt_tokens,
              "completion_tokens": response.usage.completion_tokens}
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
    return RecordPrediction(file=record.file, index=record.index, id=record.id,
                            predictions=[d.answer for d in details], details=details)


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
