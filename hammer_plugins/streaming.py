"""Find each tool call the moment its JSON object closes, while the answer is still streaming.

Used only under constrained decoding, where the output is known to be Hammer's call list, so a
brace in prose can never be mistaken for a call.

Example:
    >>> from hammer_plugins.streaming import CallScanner
    >>> scanner = CallScanner()
    >>> scanner.feed('[{"name": "a", "argu')
    []
    >>> scanner.feed('ments": {"x": "}"}}, {"name"')
    [{'name': 'a', 'arguments': {'x': '}'}}]
"""

from __future__ import annotations

import json
from typing import Any


class CallScanner:
    """Incremental scanner of a JSON list of call objects: returns each object once complete."""

    def __init__(self) -> None:
        self._text: list[str] = []
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._start: int | None = None
        self._pos = 0
        self._buffer = ""

    def feed(self, chunk: str) -> list[dict[str, Any]]:
        """Add streamed text; return the call objects completed by it, in order."""
        self._buffer += chunk
        done: list[dict[str, Any]] = []
        text = self._buffer
        for index in range(self._pos, len(text)):
            char = text[index]
            if self._in_string:
                if self._escape:
                    self._escape = False
                elif char == "\\":
                    self._escape = True
                elif char == '"':
                    self._in_string = False
                continue
            if char == '"':
                self._in_string = True
            elif char in "[{":
                self._depth += 1
                if char == "{" and self._depth == 2:
                    self._start = index
            elif char in "]}":
                self._depth -= 1
                if char == "}" and self._depth == 1 and self._start is not None:
                    try:
                        item = json.loads(text[self._start:index + 1])
                    except (ValueError, RecursionError):  # model output nested past the interpreter's limit
                        item = None
                    if isinstance(item, dict):
                        done.append(item)
                    self._start = None
        self._pos = len(text)
        return done
