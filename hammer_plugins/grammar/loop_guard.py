"""The loop guard: a decoding that repeats a string's phrase, a counting call list or an earlier call
is stopped where the repetition starts (the calls made so far kept). In-process backends feed it each
token's bytes inside their decoding loop (:mod:`hammer_plugins.grammar.token_mask`); the server backend feeds
it the streamed text (:mod:`hammer_plugins.backends.remote.loop_cut`).

Example:
    >>> guard = LoopGuard()
    >>> guard.feed(b'[{"name": "f", "arguments": {}}')
    >>> guard.looping
    False
"""

from __future__ import annotations

import codecs
import json
import re
from decimal import Decimal
from typing import Any


class LoopGuard:
    """Follows the answer being written and tells when it has fallen into a repetition loop.

    Two loops, two ways out:

    * **inside a string** (:attr:`looping`): the value, read as the text it stands for (JSON escapes
      decoded, so ``\\u00e9`` is one character), ends with a **phrase loop**: a unit of at least
      :attr:`MIN_PHRASE` (8) characters holding a letter (not only hex digits) repeated
      :attr:`MIN_REPEATS` (3) times over at least :attr:`MIN_RUN` (32) characters
      (``AI-powered AI-powered AI-powered``); or with a **runaway run**: any unit of up to
      :attr:`MAX_UNIT` (128) characters repeated over more than :attr:`MAX_RUN` (128) characters
      (``5.1.0.0.1.0.0.0.1...``). Only tokens that close the string then stay allowed. Short units
      and units without letters are data, kept up to 128 characters: ``"=" * 80``, ``"0" * 64``,
      ``|---|---|``, ``ha ha ha``, 12 emoji, ``0,0,0,0``, a base64 run of ``A``, ``null,null``;
    * **in the call list** (:attr:`list_looping`): a call just completed repeats an earlier call
      that is not right before it, or is the :attr:`MAX_SAME_CALLS`-th (3) identical call in a row,
      or for an argument-free call (``"arguments": {}``) the :attr:`MAX_SAME_BARE_CALLS`-th (8)
      (greedy decoding of a small model that has nothing to call may list ``{"input": 10},
      {"input": 5}, ...`` over and over until ``max_tokens``), or is the
      :attr:`MAX_COUNTING_CALLS`-th (5) call of a **counting run**: consecutive calls identical but
      for one value that steps by the same amount each time (``"annual_income": 10000``, ``20000``,
      ``30000``, ...; ``"time": "14:30"``, ``"15:30"``, ...: a number, or the one number that changes
      in a string). Only tokens that close the list (``]``) stay allowed, so the answer keeps that
      call and ends there. Up to three identical calls with arguments ("roll the die twice"), eight
      identical argument-free calls ("give me 5 random facts": Tool-Alpaca's gold answer calls
      ``api_v2_facts_random_get`` five times) and five counting calls fit (the longest counting run
      in a gold answer of BFCL v4 or the academic sets is four, in any order: radii 5, 10, 15, 20).

    Example:
        >>> guard = LoopGuard()
        >>> guard.feed(b'{"a": "' + b"=" * 128)   # a long divider: data, kept
        >>> guard.looping
        False
        >>> guard.feed(b"=")   # over 128 characters of one unit
        >>> guard.looping
        True
        >>> guard = LoopGuard()
        >>> guard.feed(b'{"a": "' + b"AI-powered " * 3)   # a phrase three times over 33 characters
        >>> guard.looping
        True
        >>> guard = LoopGuard()
        >>> guard.feed(b'[{"n": 1}, {"n": 2}, {"n": 1}')
        >>> guard.list_looping
        True
        >>> guard = LoopGuard()
        >>> guard.feed(b'[{"n": 10}, {"n": 20}, {"n": 30}, {"n": 40}, {"n": 50}')   # counting
        >>> guard.list_looping
        True
    """

    MIN_PHRASE = 8  # a phrase loop's unit: at least 8 characters, with a letter (not only hex digits)
    MIN_REPEATS = 3
    MIN_RUN = 32  # characters
    MAX_UNIT = 128  # characters
    MAX_RUN = 128  # any repeated unit: cut once the run is longer than this many characters
    MAX_SAME_CALLS = 3  # identical calls with arguments in a row: the list closes after the third
    MAX_SAME_BARE_CALLS = 8  # identical argument-free calls in a row: the list closes after the eighth
    MAX_COUNTING_CALLS = 5  # calls of a counting run in a row: the list closes after the fifth

    _ESCAPES = {ord('"'): '"', ord("\\"): "\\", ord("/"): "/", ord("b"): "\b", ord("f"): "\f",
                ord("n"): "\n", ord("r"): "\r", ord("t"): "\t"}
    _WINDOW = 3 * MAX_UNIT  # the characters looked at: enough for both rules

    def __init__(self) -> None:
        self.in_string = False
        self._escaped = False
        self._hex: bytearray | None = None  # the digits of a \\uXXXX escape being read
        self._high = 0  # a high surrogate waiting for its low half
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._text: list[str] = []  # the string value so far, decoded (its last characters)
        self._looping: bool | None = False  # None: to be computed
        self._depth = 0
        self._call = bytearray()  # the call (top-level list element) being written, whitespace dropped
        self._calls: list[bytes] = []
        self._last_leaves: dict[tuple[Any, ...], Any] | None = None
        self._count_step: tuple[Any, ...] | None = None
        self._count_run = 0
        self._in_list = False
        self.list_looping = False
        self.list_continued = False  # a "," came after the looping call: the loop cannot be cut there

    def feed(self, data: bytes) -> None:
        """Follow the bytes the model emitted."""
        for byte in data:
            if self._depth >= 2:
                self._call.append(byte)
            if not self.in_string:
                if byte == 0x22:
                    self._open_string()
                elif byte in b"[{":
                    self._depth += 1
                    if self._depth == 1:
                        self._in_list = byte == 0x5B  # only a call list's elements are calls
                    elif self._depth == 2:
                        self._call = bytearray(bytes([byte]))
                elif byte in b"]}":
                    self._depth -= 1
                    if self._depth == 1 and self._in_list:
                        self._end_call(bytes(self._call))
                    elif self._depth <= 0:
                        self.list_looping = False
                elif byte == 0x2C and self._depth == 1 and self.list_looping:
                    self.list_continued = True
                elif byte in b" \t\r\n" and self._depth >= 2:
                    self._call.pop()
            elif self._hex is not None:
                self._hex.append(byte)
                if len(self._hex) == 4:
                    try:
                        code = int(self._hex, 16)
                    except ValueError:  # not valid JSON; the grammar refuses it anyway
                        code = 0xFFFD
                    self._hex = None
                    self._add_code_unit(code)
            elif self._escaped:
                self._escaped = False
                if byte == ord("u"):
                    self._hex = bytearray()
                else:
                    self._add(self._ESCAPES.get(byte, chr(byte)))
            elif byte == 0x5C:
                self._escaped = True
            elif byte == 0x22:
                self.in_string = False
                self._looping = False
            else:
                self._add(self._decoder.decode(bytes([byte])))

    def _open_string(self) -> None:
        self.in_string, self._escaped, self._hex, self._high = True, False, None, 0
        self._decoder.reset()
        self._text = []
        self._looping = False

    def _add_code_unit(self, code: int) -> None:
        """A ``\\uXXXX`` escape: surrogate pairs make one character."""
        if self._high and 0xDC00 <= code < 0xE000:
            high, self._high = self._high, 0
            self._add(chr(0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00)))
            return
        if 0xD800 <= code < 0xDC00:
            self._add("")  # an unpaired high surrogate before this one stays a character of its own
            self._high = code
            return
        self._add(chr(code))

    def _add(self, chars: str) -> None:
        if self._high:
            chars, self._high = chr(self._high) + chars, 0
        if chars:
            self._text.extend(chars)
            if len(self._text) > 2 * self._WINDOW:
                del self._text[:-self._WINDOW]
            self._looping = None

    def _end_call(self, call: bytes) -> None:
        calls = self._calls
        before = 0  # identical calls right before this one
        while before < len(calls) and calls[-1 - before] == call:
            before += 1
        limit = self.MAX_SAME_BARE_CALLS if call.endswith(b'"arguments":{}}') else self.MAX_SAME_CALLS
        if call in calls[:len(calls) - before] or before + 1 >= limit:
            self.list_looping = True
        calls.append(call)
        self._count(call)

    def _count(self, call: bytes) -> None:
        """Follow counting runs: consecutive calls that differ in one value, by the same step each time."""
        try:
            leaves = dict(_leaves(json.loads(call, parse_float=Decimal)))
        except ValueError:
            leaves = None
        step = _step(self._last_leaves, leaves) if self._last_leaves is not None and leaves is not None else None
        self._count_run = self._count_run + 1 if step is not None and step == self._count_step else (2 if step else 1)
        self._count_step, self._last_leaves = step, leaves
        if self._count_run >= self.MAX_COUNTING_CALLS:
            self.list_looping = True

    @property
    def looping(self) -> bool:
        """Inside a string that ends with a phrase loop or a runaway run (see the class docstring)."""
        if not self.in_string:
            return False
        if self._looping is None:
            self._looping = self._repeats("".join(self._text[-self._WINDOW:]))
        return self._looping

    def _repeats(self, text: str) -> bool:
        n = len(text)
        for unit in range(1, min(self.MAX_UNIT, n // self.MIN_REPEATS) + 1):
            if unit >= self.MIN_PHRASE:  # a phrase loop
                run = max(self.MIN_RUN, self.MIN_REPEATS * unit)
                if run <= n and text[n - run + unit:] == text[n - run:n - unit] and _is_phrase(text[n - unit:]):
                    return True
            run = max(self.MAX_RUN + 1, self.MIN_REPEATS * unit)  # a runaway run of any unit
            if run <= n and text[n - run + unit:] == text[n - run:n - unit]:
                return True
        return False


_HEX = frozenset("0123456789abcdefABCDEF")


def _is_phrase(unit: str) -> bool:
    """A unit of words: primitive (not a shorter unit repeated), with a letter, not only hex digits."""
    return ((unit + unit).find(unit, 1) == len(unit) and any(c.isalpha() for c in unit)
            and not all(c in _HEX for c in unit))


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Any:
    """(path, value) for every scalar (or empty container) of a parsed JSON value."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    else:
        yield path, value


_NUMBERS = re.compile(r"(\d+)")


def _step(before: dict[tuple[Any, ...], Any], after: dict[tuple[Any, ...], Any]) -> tuple[Any, ...] | None:
    """How ``after`` counts on from ``before``: the one value that differs, a number (or a string in which one
    number differs), as ``(path, which number in the string, step)``; None when they differ otherwise."""
    if before.keys() != after.keys():
        return None
    differ = [path for path, value in after.items()
              if type(value) is not type(before[path]) or value != before[path]]
    if len(differ) != 1:
        return None
    path = differ[0]
    old, new = before[path], after[path]
    if all(isinstance(v, (int, Decimal)) and not isinstance(v, bool) for v in (old, new)):
        return path, -1, new - old
    if not isinstance(old, str):
        return None
    old_parts, new_parts = _NUMBERS.split(old), _NUMBERS.split(new)
    if len(old_parts) != len(new_parts) or old_parts[0::2] != new_parts[0::2]:
        return None
    changed = [i for i in range(1, len(old_parts), 2) if int(old_parts[i]) != int(new_parts[i])]
    if len(changed) != 1 or any(old_parts[i] != new_parts[i] for i in range(1, len(old_parts), 2) if i != changed[0]):
        return None
    i = changed[0]
    return path, i, int(new_parts[i]) - int(old_parts[i])
