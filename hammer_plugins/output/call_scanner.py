"""Find each tool call the moment its JSON object closes, while the answer is still streaming.

Used only where the output is read as Hammer's call list (under constrained decoding in the engine;
the vLLM tool parser, which decides from the answer's first character), so a brace in prose can
never be mistaken for a call. Linear in the answer: each character is looked at once, and each call
object is decoded once, when it closes (a parser that re-reads the whole answer on every token is
quadratic: 26 s of CPU for one 32k-character call).

Example:
    >>> from hammer_plugins.output.call_scanner import CallScanner
    >>> scanner = CallScanner()
    >>> scanner.feed('[{"name": "a", "argu')
    []
    >>> scanner.open_name
    'a'
    >>> scanner.feed('ments": {"x": "}"}}, {"name"')
    [{'name': 'a', 'arguments': {'x': '}'}}]
"""

from __future__ import annotations

import json
from typing import Any


class CallScanner:
    """Incremental scanner of a JSON list of call objects: returns each object once complete.

    Besides the closed objects it keeps what a stream needs to know early, without re-reading:
    :attr:`open_name` (the ``"name"`` of the call object being written, once that string is
    complete), :attr:`closed_empty` (the answer's list closed with nothing in it: Hammer's ``[]``)
    and :attr:`scanned` (characters looked at so far: the work done, for tests that bound it).
    """

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._object: list[str] | None = None  # the depth-2 object being written, in pieces
        self._string: list[str] | None = None  # a depth-2 key or value string being written
        self._expect_key = False
        self._key: str | None = None
        self._first_open = ""  # the answer's first bracket: "[" for a call list
        self._list_items = False  # anything but whitespace inside the top-level list
        self.open_name: str | None = None
        self.closed_empty = False
        self.scanned = 0

    def feed(self, chunk: str) -> list[dict[str, Any]]:
        """Add streamed text; return the call objects completed by it, in order."""
        return [item for _, item in self.feed_objects(chunk) if isinstance(item, dict)]

    def feed_objects(self, chunk: str) -> list[tuple[str, Any]]:
        """Add streamed text; return ``(text, value)`` for each depth-2 object it closes, in order
        (``value`` is None where the text is not JSON)."""
        done: list[tuple[str, Any]] = []
        start = 0 if self._object is not None else None  # where the open object's text resumes in this chunk
        string_from = 0 if self._string is not None else None
        self.scanned += len(chunk)
        for index, char in enumerate(chunk):
            if self._in_string:
                if self._escape:
                    self._escape = False
                elif char == "\\":
                    self._escape = True
                elif char == '"':
                    self._in_string = False
                    if string_from is not None and self._string is not None:
                        self._string.append(chunk[string_from:index + 1])
                        self._end_string("".join(self._string))
                        self._string, string_from = None, None
                continue
            if self._depth == 1 and self._first_open == "[" and not char.isspace() and char != "]":
                self._list_items = True
            if char == '"':
                self._in_string = True
                if self._depth == 2 and self._object is not None:
                    self._string, string_from = [], index
            elif char in "[{":
                self._depth += 1
                if self._depth == 1 and not self._first_open:
                    self._first_open = char
                if char == "{" and self._depth == 2:
                    self._object, start = [], index
                    self._expect_key, self._key, self.open_name = True, None, None
            elif char in "]}":
                self._depth -= 1
                if char == "}" and self._depth == 1 and self._object is not None and start is not None:
                    self._object.append(chunk[start:index + 1])
                    text = "".join(self._object)
                    try:
                        item = json.loads(text)
                    except (ValueError, RecursionError):  # model output nested past the interpreter's limit
                        item = None
                    done.append((text, item))
                    self._object, start, self.open_name = None, None, None
                elif char == "]" and self._depth == 0 and self._first_open == "[" and not self._list_items:
                    self.closed_empty = True
            elif self._depth == 2 and self._object is not None:
                if char == ":":
                    self._expect_key = False
                elif char == ",":
                    self._expect_key, self._key = True, None
        if self._object is not None and start is not None:
            self._object.append(chunk[start:])
        if self._string is not None and string_from is not None:
            self._string.append(chunk[string_from:])
        return done

    def _end_string(self, literal: str) -> None:
        """A key or value string of the open call object is complete: remember the key, or the name."""
        try:
            value = json.loads(literal)
        except ValueError:
            return
        if self._expect_key:
            self._key = value
        elif self._key == "name" and self.open_name is None and isinstance(value, str):
            self.open_name = value
