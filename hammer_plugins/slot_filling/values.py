"""Rules over slot values: what counts as not given, what a call really fills, what the user said.

Slot filling (:mod:`hammer_plugins.slot_filling.filler`), the engine's ask-or-call rule
(:mod:`hammer_plugins.engine.missing`) and HammerBench's runner judge the values of a call with these:
HammerBench's ``"\\\\"`` placeholder and empty strings mean "not given", a value is grounded when
somebody gave it (:func:`given_text`: the user, the caller's instructions, a tool result), and
``"Paris "`` is the same slot value as ``"paris"``. :func:`ungrounded_values` is the one grounding check;
:func:`ground_call` applies it to a whole call (defaults, required parameters).

Example:
    >>> clean_arguments({"city": " Paris ", "date": "\\\\"}), same_value("Paris ", "paris")
    ({'city': 'Paris'}, True)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from hammer_plugins.tools.definition import Tool
from hammer_plugins.values.messages import Message


def is_empty_value(value: Any) -> bool:
    """Empty strings, ``None`` and HammerBench's ``"\\\\"`` placeholder mean "not given"."""
    if value is None:
        return True
    return isinstance(value, str) and value.strip() in ("", "\\")


def clean_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Drop unknown (empty) values and strip strings: the slots the call actually fills.

    Example:
        >>> clean_arguments({"city": " Paris ", "date": "", "n": 0})
        {'city': 'Paris', 'n': 0}
    """
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if is_empty_value(value):
            continue
        out[key] = value.strip() if isinstance(value, str) else value
    return out


# A run of Chinese or Japanese characters (no spaces) is one "word", so there a value must be written as the user
# wrote it. Reading runs as character pairs spared right values said in other words ("停车计时器未开启" for
# "停车计时器没开": 6 more of HammerBench's 200 Chinese answer keys kept) but let invented ones through ("公交1" for
# "公交"): on the stand-in's Chinese ST_Imperfect answers the rule then fixed 18 instead of 26 of 40 (65.00 -> 45.00).
# A held right value costs the user one answer; an invented one that passes runs a wrong call.
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def is_grounded(value: Any, said: str) -> bool:
    """Whether a slot value is supported by what the user said: a substring, or half its words.

    Booleans always count as grounded (users rarely say "true"). Example:
        >>> is_grounded("Yue B88888", "My plate number is yue b88888."), is_grounded("1234567890", "Pay my fine")
        (True, False)
    """
    if isinstance(value, bool) or value is None:
        return True
    text = str(value).strip().casefold()
    haystack = said.casefold()
    if not text or text in haystack:
        return True
    words = _WORD.findall(text)
    if not words:
        return True
    spoken = set(_WORD.findall(haystack))
    return sum(w in spoken for w in words) * 2 >= len(words)


def same_value(a: Any, b: Any) -> bool:
    """Whether two slot values are the same to a user: strings compared without case and outer spaces."""
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().casefold() == b.strip().casefold()
    return bool(a == b)


GIVING_ROLES = ("system", "user", "tool")
"""Who can give a value: the caller's instructions, the user, a tool's result (never the model itself)."""


def given_text(messages: Sequence[Message]) -> str:
    """What was given in a conversation, as one text to ground values in: every system, user and tool message.

    Example:
        >>> given_text([Message.user("Pay my fine"), Message.assistant("Which city?"), Message.user("Paris")])
        'Pay my fine\\nParis'
    """
    return "\n".join(m.content for m in messages if m.role in GIVING_ROLES and m.content)


def ungrounded_values(arguments: Mapping[str, Any], said: str,
                      accepted: Mapping[str, Any] | None = None) -> list[str]:
    """The one grounding check: the names of the values in ``arguments`` that nobody gave (not
    :func:`is_grounded` in ``said``), leaving out those already ``accepted`` with the same value.

    Example:
        >>> ungrounded_values({"city": "Paris", "plate": "ABC123"}, "Pay my fine in Paris")
        ['plate']
        >>> ungrounded_values({"plate": "ABC123"}, "yes", accepted={"plate": "abc123"})
        []
    """
    accepted = accepted or {}
    return [k for k, v in arguments.items()
            if not (k in accepted and same_value(accepted[k], v)) and not is_grounded(v, said)]


class Grounding(BaseModel):
    """A call's arguments held to what was given (:func:`ground_call`).

    ``arguments``: the values that stand (given, accepted, or the schema's default), in schema order;
    ``ungrounded``: values nobody gave, dropped; ``defaulted``: parameters filled from the schema's default;
    ``missing``: required parameters still without a value (to ask for).

    Example:
        >>> Grounding(arguments={"city": "Paris"}, missing=["plate"]).complete
        False
    """

    arguments: dict[str, Any] = Field(default_factory=dict)
    ungrounded: list[str] = Field(default_factory=list)
    defaulted: list[str] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.missing


def ground_call(tool: Tool, arguments: Mapping[str, Any], said: str,
                accepted: Mapping[str, Any] | None = None) -> Grounding:
    """``arguments`` of a call to ``tool`` held to what was given: a value nobody gave is dropped
    (:func:`ungrounded_values`; a value equal to the schema's ``default`` counts as given); a required
    parameter left without a value takes its schema ``default`` when it has one, and is ``missing`` when it
    has none. Values not in the schema stay (the
    schema check is the grammar's and the tool's).

    Example:
        >>> tool = Tool(name="pay_fine", parameters={"type": "object", "properties": {
        ...     "city": {"type": "string"}, "plate": {"type": "string"},
        ...     "currency": {"type": "string", "default": "CNY"}}, "required": ["city", "plate", "currency"]})
        >>> g = ground_call(tool, {"city": "Guangzhou", "plate": "1234567890", "currency": "USD"}, "Pay my fine in Guangzhou")
        >>> g.arguments, g.ungrounded, g.defaulted, g.missing
        ({'city': 'Guangzhou', 'currency': 'CNY'}, ['plate', 'currency'], ['currency'], ['plate'])
    """
    props = tool.properties
    known = clean_arguments(arguments)
    # The schema's own default is given by the schema: get_weather's unit "celsius" is no invention.
    ungrounded = [k for k in ungrounded_values(known, said, accepted)
                  if k in props and not (isinstance(props[k], Mapping) and "default" in props[k]
                                         and same_value(props[k]["default"], known[k]))]
    for key in ungrounded:
        known.pop(key)
    # Only a required parameter takes the schema's default here: an optional one left out gets it from
    # the tool itself, and adding it would put a value in the call that nobody (not even the model) chose.
    defaulted = [k for k in tool.required
                 if k not in known and isinstance(props.get(k), Mapping) and "default" in props[k]]
    for key in defaulted:
        known[key] = props[key]["default"]
    ordered = {k: known[k] for k in props if k in known} | {k: v for k, v in known.items() if k not in props}
    return Grounding(arguments=ordered, ungrounded=ungrounded, defaulted=defaulted,
                     missing=[k for k in tool.required if k not in ordered])
