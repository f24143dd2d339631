"""A call's arguments on the wire, as every API that streams calls sends them: one JSON string, cut into
fragments of one top-level member each.

Example:
    >>> from hammer_plugins import ToolCall
    >>> arguments_json(ToolCall(name="f", arguments={"city": "Zürich"}))
    '{"city": "Zürich"}'
"""

from __future__ import annotations

import json

from hammer_plugins.output.parsing import structural_characters
from hammer_plugins.values.calls import ToolCall


def arguments_json(call: ToolCall) -> str:
    return json.dumps(call.arguments, ensure_ascii=False)


def argument_fragments(arguments: str) -> list[str]:
    """A call's arguments JSON cut into the pieces a stream sends: one top-level member each.

    Example:
        >>> argument_fragments('{"city": "Paris", "unit": "celsius"}')
        ['{"city": "Paris"', ', "unit": "celsius"', '}']
        >>> "".join(argument_fragments('{"a": {"b": [1, 2]}}'))
        '{"a": {"b": [1, 2]}}'
    """
    pieces: list[str] = []
    depth = 0
    start = 0
    for index, char in structural_characters(arguments):
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                if index > start:
                    pieces.append(arguments[start:index])
                start = index
        elif char == "," and depth == 1:
            pieces.append(arguments[start:index])
            start = index
    pieces.append(arguments[start:])
    return [p for p in pieces if p]
