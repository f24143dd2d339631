"""One call to the engine as one typed value: :class:`EngineRequest`.

Every door builds it (each API's request type with ``to_engine_request()``, ChatHammer, HammerLLM, the
``hammer`` command), and :meth:`HammerEngine.generate <hammer_plugins.engine.api.HammerEngine.generate>`,
``stream``, the planner and the API server's worker take it. It is frozen, and a field that does not exist
fails where the request is built (``TypeError``), never later as a client's error.

The rules a request is held to (results answering calls, the tools, ``tool_choice``) are
:mod:`~hammer_plugins.engine.rules`'s, written once for every door.

Example:
    >>> from hammer_plugins import Message
    >>> request = EngineRequest.of([Message.user("hi")], temperature=0.2, max_tokens=32)
    >>> request.sampling(), request.tool_choice
    ({'max_tokens': 32, 'temperature': 0.2}, 'auto')
    >>> try:
    ...     EngineRequest.of([Message.user("hi")], temprature=0.2)
    ... except TypeError as exc:
    ...     print(exc)
    unknown request options ['temprature']; the options are EngineRequest's fields (max_tokens, temperature, ...)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hammer_plugins.slot_filling.filler import SlotFiller
from hammer_plugins.values.messages import Message, to_message

RefusalMode = Literal["message", "answer", "raise"]
"""What Hammer's ``[]`` becomes: a refusal message, a plain-language answer, or :class:`RefusalError`."""

OnMissing = Literal["ask", "call", "error"]
"""What a call becomes when nobody gave one of its required values (:mod:`~hammer_plugins.engine.missing`): held
back and asked for (``"ask"``), sent as the model wrote it (``"call"``), or a ``MissingArgumentsError``."""

SAMPLING_FIELDS = ("max_tokens", "temperature", "top_p", "top_k", "repeat_penalty", "repeat_last_n", "loop_guard",
                   "seed", "stop")
"""The request's fields that override the engine's sampling settings for one call (None: the engine's)."""


SEED_MAX = 2**64 - 1
"""Largest seed: an unsigned 64-bit integer (torch's generator takes it whole). Larger ones wrapped in C
(2**64 + 5 sampled as seed 5): a request's seed outside 0..SEED_MAX is refused, naming the field."""

TOP_K_MAX = 1 << 20
"""Largest ``top_k``: above every served model's vocabulary (Hammer's has 151,665 tokens; 262,144 is the largest
common one), far below a C ``int``, where ``2**32`` wrapped to 0 (sampling off)."""

COUNT_MAX = 2**31 - 1
"""Largest token count (``max_tokens``, ``repeat_last_n``): llama.cpp's C ``int32``."""


class EngineRequest(BaseModel):
    """One call: the conversation, the tools, ``tool_choice`` and every option, typed and frozen.

    Options left ``None`` take the engine's setting. ``max_tool_rounds="default"`` is the engine's cap
    (``None``: no cap). ``pinned_tools`` stay offered when a large tool set is narrowed (``tool_budget``
    overrides the engine's budget for this call). ``slot_filling`` (``True``, a dict of
    :class:`~hammer_plugins.slot_filling.filler.SlotFiller` options, or a filler) makes a user turn a
    slot-filling step; ``partial_calls`` lets a call leave out required parameters (one raw snapshot).
    ``on_missing`` overrides the engine's ask-or-call rule for this call (:data:`OnMissing`).
    ``relevance_gate`` overrides the engine's gate for this call. ``record_passes``: the answer's ``passes`` hold
    each pass's prompt, offered tools and shown names as it ran (:class:`~hammer_plugins.output.record.PassRecord`).

    Example:
        >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend
        >>> engine = HammerEngine(backend=ScriptedBackend(['[{"name": "ping", "arguments": {}}]']))
        >>> request = EngineRequest(messages=[Message.user("ping it")], tools=[{"name": "ping", "parameters": {}}])
        >>> engine.generate(request).tool_calls[0].name
        'ping'
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    messages: tuple[Message, ...]
    tools: tuple[Any, ...] = ()
    tool_choice: Any = "auto"
    mask_names: bool | None = None
    constrained: bool | None = None
    parallel_tool_calls: bool | None = None
    on_refusal: RefusalMode | None = None
    on_missing: OnMissing | None = None
    response_format: dict[str, Any] | None = None
    max_tool_rounds: int | None | Literal["default"] = "default"
    slot_filling: bool | dict[str, Any] | SlotFiller | None = None
    partial_calls: bool = False
    pinned_tools: tuple[str, ...] = ()
    tool_budget: int | None = None
    relevance_gate: bool | None = None  # None: the engine's setting
    record_passes: bool = False  # the answer carries what the model read, pass by pass (output/record.py)
    # Sampling for this call (SAMPLING_FIELDS); None: the engine's setting.
    # Integers bounded where C would wrap them (SEED_MAX, TOP_K_MAX, COUNT_MAX): a ValueError naming the field.
    max_tokens: int | None = Field(None, le=COUNT_MAX)
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = Field(None, ge=0, le=TOP_K_MAX)
    repeat_penalty: float | None = None
    repeat_last_n: int | None = Field(None, le=COUNT_MAX)
    loop_guard: bool | None = None
    seed: int | None = Field(None, ge=0, le=SEED_MAX)
    stop: tuple[str, ...] | None = Field(None)

    @field_validator("messages", mode="before")
    @classmethod
    def _messages(cls, value: Any) -> tuple[Message, ...]:
        if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
            raise TypeError(f"messages must be a list of messages, got {type(value).__name__}")
        return tuple(to_message(m) for m in value)

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, value: Any) -> tuple[Any, ...]:
        return () if value is None else tuple(value)

    @field_validator("tool_choice", mode="before")
    @classmethod
    def _tool_choice(cls, value: Any) -> Any:
        return "auto" if value is None else value

    @field_validator("stop", mode="before")
    @classmethod
    def _stop(cls, value: Any) -> tuple[str, ...] | None:
        return (value,) if isinstance(value, str) else value

    @classmethod
    def of(cls, messages: Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None = None,
           tool_choice: Any = "auto", **options: Any) -> EngineRequest:
        """The request for ``engine.generate(messages, tools, tool_choice, **options)``: an option that is no
        field is a ``TypeError`` naming it (a misspelling fails at the call, as a keyword argument would)."""
        unknown = sorted(set(options) - set(cls.model_fields))
        if unknown:
            raise TypeError(f"unknown request options {unknown}; the options are EngineRequest's fields "
                            "(max_tokens, temperature, ...)")
        try:
            return cls(messages=messages, tools=tools, tool_choice=tool_choice, **options)
        except ValidationError as exc:
            first = exc.errors()[0]
            place = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"{place}: {first['msg']} (got {first.get('input')!r:.80})") from None

    def sampling(self) -> dict[str, Any]:
        """The sampling settings this call sets, by name (those left ``None`` are the engine's)."""
        chosen = {name: getattr(self, name) for name in SAMPLING_FIELDS if getattr(self, name) is not None}
        if "stop" in chosen:
            chosen["stop"] = list(chosen["stop"])
        return chosen
