"""Rules over slot values: what counts as not given, what a call really fills, what the user said.

Slot filling (:mod:`hammer_plugins.slot_filling.filler`) and HammerBench's runner judge the values of a
snapshot call with these: HammerBench's ``"\\\\"`` placeholder and empty strings mean "not given",
a value is grounded when the user said it, and ``"Paris "`` is the same slot value as ``"paris"``.

Example:
    >>> clean_arguments({"city": " Paris ", "date": "\\\\"}), same_value("Paris ", "paris")
    ({'city': 'Paris'}, True)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


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
