"""What one engine call returns: the classified output plus usage, finish reason, timings and how it was decoded.

Example:
    >>> from hammer_plugins.output.response import HammerResponse, Usage
    >>> r = HammerResponse(kind="refusal", text="Sorry, no tool is suitable for your request.",
    ...                    usage=Usage(prompt_tokens=10, completion_tokens=2))
    >>> r.usage.total_tokens, r.is_refusal
    (12, True)
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from hammer_plugins.output.decoding import Decoding
from hammer_plugins.output.parsing import ParsedOutput
from hammer_plugins.output.record import PassRecord
from hammer_plugins.output.timings import Timings
from hammer_plugins.output.usage import Usage
from hammer_plugins.output.views import call_text, grid, table
from hammer_plugins.values.calls import PENDING_CALLS_KEY, PendingCall

OFFERED_TOOLS_KEY = "hammer_offered_tools"
"""The field of every API's answer that names the tools a selection offered (:meth:`HammerResponse.offered_extension`)."""

DEFAULT_REFUSAL_TEXT = "Sorry, no tool is suitable for your request."
"""What a refusal says by default (HammerBench's termination text, which Hammer is scored on)."""


class HammerResponse(ParsedOutput):
    """One answer: calls, refusal, text or invalid calls, with how it was produced.

    ``text`` is what to show a person: prose around calls, the refusal text, or the answer.
    ``finish_reason`` is ``"stop"``, ``"length"`` (cut by ``max_tokens``) or ``"tool_calls"``.
    ``usage`` counts tokens (``usage.cached_prompt_tokens``: those a cache served), ``timings`` the seconds,
    ``decoding`` what the decoder did (the loop guard, the relevance gate). ``timings`` still reads the keys of
    the dict it used to be (``timings["loop_guard_stop"]``), and ``timings=`` still takes such a dict.
    ``passes``: what the model read for this answer, pass by pass (its prompt, offered tools, shown names, whether
    it ran), when the request asked for it with ``record_passes=True`` (:mod:`hammer_plugins.output.record`).
    ``pending_calls``: the calls held back because nobody gave some required values (``on_missing="ask"``);
    the answer is then ``kind="text"``, its ``text`` the question asking for them.
    A slot-filling turn (``slot_filling=``) answers with the subclass
    :class:`~hammer_plugins.slot_filling.filler.SlotFillingResponse`, which adds its snapshot and decision.

    Example:
        >>> HammerResponse(kind="text", text="Hi!", usage=Usage(prompt_tokens=3, completion_tokens=2)).usage.total_tokens
        5
    """

    usage: Usage = Field(default_factory=Usage)
    finish_reason: str = "stop"
    model: str = ""
    timings: Timings = Field(default_factory=Timings)
    decoding: Decoding = Field(default_factory=Decoding)
    # The tools the prompt offered when a large tool set was narrowed to the best matches (the engine's
    # tool_budget); None: every tool given was offered.
    offered_tools: list[str] | None = None
    # The calls an ask holds back (on_missing="ask", engine/missing.py): the next user turn completes them.
    pending_calls: list[PendingCall] = Field(default_factory=list)
    # What the model read, pass by pass, when the request asked (record_passes=True); None: not asked.
    passes: list[PassRecord] | None = None

    def pending_extension(self) -> dict[str, list[dict[str, Any]]]:
        """The pending calls as every door's extension field, ``{"hammer_pending_calls": [...]}`` (empty: none).

        Example:
            >>> HammerResponse(kind="text", pending_calls=[PendingCall(name="f", id="c1", missing=["a"])]).pending_extension()
            {'hammer_pending_calls': [{'id': 'c1', 'name': 'f', 'arguments': {}, 'missing': ['a']}]}
        """
        return {PENDING_CALLS_KEY: [c.to_wire() for c in self.pending_calls]} if self.pending_calls else {}

    def offered_extension(self) -> dict[str, list[str]]:
        """The tools a selection offered as every door's extension field, ``{"hammer_offered_tools": [...]}`` (empty:
        no selection was made, every tool given was offered).

        Example:
            >>> HammerResponse(kind="text", offered_tools=["get_weather", "get_time"]).offered_extension()
            {'hammer_offered_tools': ['get_weather', 'get_time']}
            >>> HammerResponse(kind="text").offered_extension()
            {}
        """
        return {OFFERED_TOOLS_KEY: list(self.offered_tools)} if self.offered_tools is not None else {}

    @model_validator(mode="before")
    @classmethod
    def _old_timings(cls, data: Any) -> Any:
        """``timings=`` given as the old dict: its counts and flags go to ``usage`` and ``decoding``."""
        if not isinstance(data, dict) or not isinstance(data.get("timings"), dict):
            return data
        timings, usage, decoding = Timings.split_legacy(data["timings"])
        data = {**data, "timings": timings}
        for name, fields in (("usage", usage), ("decoding", decoding)):
            if fields:
                given = data.get(name)
                base = given.model_dump(exclude={"total_tokens"}) if hasattr(given, "model_dump") else dict(given or {})
                data[name] = {**base, **fields}
        return data

    @model_validator(mode="after")
    def _link_timings(self) -> HammerResponse:
        self.timings = self.timings.linked(self.usage, self.decoding)
        return self

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Any:
        """A copy whose ``timings`` read the old keys from the copy's own usage and decoding."""
        copy = super().model_copy(update=update, deep=deep)
        copy.timings = copy.timings.linked(copy.usage, copy.decoding)
        return copy

    def __repr__(self) -> str:
        """Short: the kind, the calls as one line each, the text's start, the finish reason and the tokens."""
        parts = [f"kind={self.kind!r}"]
        if self.tool_calls:
            parts.append("calls=[" + ", ".join(call_text(c.name, c.arguments) for c in self.tool_calls) + "]")
        if self.text:
            parts.append(f"text={self.text[:60] + ('...' if len(self.text) > 60 else '')!r}")
        parts.append(f"finish_reason={self.finish_reason!r}")
        parts.append(f"tokens={self.usage.prompt_tokens}+{self.usage.completion_tokens}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def _repr_html_(self) -> str:
        """The notebook view: what was answered, its calls, and how (tokens, time, the tools offered)."""
        rows: list[tuple[str, object]] = [("kind", "refusal: no tool fits ([])" if self.is_refusal else self.kind)]
        if self.text:
            rows.append(("text", self.text))
        rows += [("invalid call", f"{c.reason}: {c.raw}") for c in self.invalid_tool_calls]
        rows += [("finish reason", self.finish_reason),
                 ("tokens", f"{self.usage.prompt_tokens} prompt + {self.usage.completion_tokens} completion")]
        if self.usage.cached_prompt_tokens:
            rows.append(("cached prompt tokens", self.usage.cached_prompt_tokens))
        if self.timings.time_to_first_token is not None:
            rows.append(("time to first token", f"{self.timings.time_to_first_token:.2f} s"))
        if self.offered_tools is not None:
            rows.append(("offered tools", ", ".join(self.offered_tools)))
        for number, done in enumerate(self.passes or [], start=1):
            ran = (f"{done.prompt_tokens} prompt tokens" if done.model_ran
                   else "not run: the relevance gate refused (no tool shares a word with the question)")
            offered = ", ".join(done.offered_tools) or "no tools"
            rows += [(f"pass {number}: {done.stage}", f"{ran}; offered: {offered}"), (f"pass {number} prompt", done.prompt)]
        calls = grid(["call", "name", "arguments"], [(c.id, c.name, c.arguments) for c in self.tool_calls],
                     "calls") if self.tool_calls else ""
        return table(rows, type(self).__name__) + calls
