"""What one engine call returns: the classified output plus usage, finish reason and timings.

Example:
    >>> from hammer_plugins.output.response import HammerResponse, Usage
    >>> r = HammerResponse(kind="refusal", text="Sorry, no tool is suitable for your request.",
    ...                    usage=Usage(prompt_tokens=10, completion_tokens=2))
    >>> r.usage.total_tokens, r.is_refusal
    (12, True)
"""

from __future__ import annotations

from pydantic import BaseModel, Field, computed_field

from hammer_plugins.output.parsing import ParsedOutput
from hammer_plugins.output.views import call_text, grid, table

DEFAULT_REFUSAL_TEXT = "Sorry, no tool is suitable for your request."
"""What a refusal says by default (HammerBench's termination text, which Hammer is scored on)."""


class Usage(BaseModel):
    """Token counts of one call (summed over both passes when a refusal is answered in prose).

    Example:
        >>> (Usage(prompt_tokens=10, completion_tokens=2) + Usage(prompt_tokens=5, completion_tokens=1)).total_tokens
        18
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(prompt_tokens=self.prompt_tokens + other.prompt_tokens,
                     completion_tokens=self.completion_tokens + other.completion_tokens)


class HammerResponse(ParsedOutput):
    """One answer: calls, refusal, text or invalid calls, with how it was produced.

    ``text`` is what to show a person: prose around calls, the refusal text, or the answer.
    ``finish_reason`` is ``"stop"``, ``"length"`` (cut by ``max_tokens``) or ``"tool_calls"``.
    A slot-filling turn (``slot_filling=``) answers with the subclass
    :class:`~hammer_plugins.slot_filling.filler.SlotFillingResponse`, which adds its snapshot and decision.

    Example:
        >>> HammerResponse(kind="text", text="Hi!", usage=Usage(prompt_tokens=3, completion_tokens=2)).usage.total_tokens
        5
    """

    usage: Usage = Field(default_factory=Usage)
    finish_reason: str = "stop"
    model: str = ""
    timings: dict[str, float] = Field(default_factory=dict)
    # The tools the prompt offered when a large tool set was narrowed to the best matches (the engine's
    # tool_budget); None: every tool given was offered.
    offered_tools: list[str] | None = None

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
        if "time_to_first_token" in self.timings:
            rows.append(("time to first token", f"{self.timings['time_to_first_token']:.2f} s"))
        if self.offered_tools is not None:
            rows.append(("offered tools", ", ".join(self.offered_tools)))
        calls = grid(["call", "name", "arguments"], [(c.id, c.name, c.arguments) for c in self.tool_calls],
                     "calls") if self.tool_calls else ""
        return table(rows, type(self).__name__) + calls
