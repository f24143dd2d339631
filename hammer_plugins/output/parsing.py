"""Turn model output into tool calls, a refusal, plain text, or invalid calls. Never raises.

Accepted layouts: a fenced or bare JSON list of ``{"name", "arguments"}``, a single call object,
``{"tool_calls": [...]}``, ``parameters`` in place of ``arguments``, arguments given as a JSON
string, OpenAI-style ``{"function": {...}}`` items, Python-literal quoting, and prose around any
of these. ``[]`` is a refusal. Output that starts a call but does not parse (for instance cut off
by ``max_tokens``) becomes an invalid call carrying the raw text and the reason.

Example:
    >>> from hammer_plugins.output.parsing import parse_output
    >>> out = parse_output('Sure!\\n```json\\n[{"name": "get_weather", "arguments": {"city": "Paris"}}]\\n```')
    >>> out.kind, out.tool_calls[0].name, out.tool_calls[0].arguments
    ('tool_calls', 'get_weather', {'city': 'Paris'})
    >>> parse_output("[]").kind
    'refusal'
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, Field

from hammer_plugins.output.call_scanner import CallScanner
from hammer_plugins.values.calls import InvalidToolCall, ToolCall

OutputKind = Literal["tool_calls", "refusal", "text", "invalid"]

_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)(?:```|$)", re.DOTALL)
_NAME = re.compile(r"""["']name["']\s*:\s*["']([^"']+)["']""")
_MAX_SCAN = 64  # JSON start positions tried in prose; bounds the work on long outputs
_MAX_LEN = 200_000


class ParsedOutput(BaseModel):
    """What the model said, classified.

    ``kind`` is ``"tool_calls"`` when at least one call is well-formed (malformed siblings are in
    ``invalid_tool_calls``), ``"refusal"`` for ``[]``, ``"invalid"`` when only malformed calls were
    found, and ``"text"`` for plain language. ``text`` holds prose found around the JSON.

    Example:
        >>> ParsedOutput(kind="text", text="hi", raw="hi").is_refusal
        False
    """

    kind: OutputKind
    tool_calls: list[ToolCall] = Field(default_factory=list)
    invalid_tool_calls: list[InvalidToolCall] = Field(default_factory=list)
    text: str = ""
    raw: str = ""

    @property
    def is_refusal(self) -> bool:
        return self.kind == "refusal"


def parse_output(raw: str) -> ParsedOutput:
    """Classify one complete model answer. Never raises on any string."""
    try:
        return _parse(raw if isinstance(raw, str) else str(raw))
    except Exception as exc:  # last line of defence: model output must never raise
        return ParsedOutput(
            kind="invalid",
            invalid_tool_calls=[InvalidToolCall(raw=str(raw), reason=f"unparseable output ({type(exc).__name__})")],
            raw=str(raw),
        )


def parse_stopped_list(raw: str) -> ParsedOutput:
    """The complete calls of a call list whose generation was stopped before its end (the loop guard
    stops a list that keeps repeating calls): each call object closed so far, in order.

    Example:
        >>> parse_stopped_list('[{"name": "f", "arguments": {"n": 1}}, {"name": "f", "arguments": {"n": 1}},').kind
        'tool_calls'
    """
    try:
        calls, invalid = items_to_calls(CallScanner().feed(raw), raw)
    except Exception:  # noqa: BLE001 - model output never raises; the plain parse reports it
        return parse_output(raw)
    return ParsedOutput(kind="tool_calls", tool_calls=calls, invalid_tool_calls=invalid, raw=raw) if calls \
        else parse_output(raw)


def _parse(raw: str) -> ParsedOutput:
    text = raw.strip()
    if not text:
        return ParsedOutput(kind="text", text="", raw=raw)
    for value, start, end in _json_candidates(text[:_MAX_LEN]):
        items = _call_items(value)
        if items is None:
            continue
        prose = _strip_fences(text[:start] + " " + text[end:]).strip()
        if not items:
            return ParsedOutput(kind="refusal", text=prose, raw=raw)
        calls, invalid = items_to_calls(items, raw)
        kind: OutputKind = "tool_calls" if calls else "invalid"
        return ParsedOutput(kind=kind, tool_calls=calls, invalid_tool_calls=invalid, text=prose, raw=raw)
    if _looks_like_call(text):
        name_match = _NAME.search(text)
        return ParsedOutput(
            kind="invalid",
            invalid_tool_calls=[InvalidToolCall(
                raw=raw,
                name=name_match.group(1) if name_match else None,
                reason="the output starts a tool call but is not complete JSON (cut off by max_tokens, or malformed)",
            )],
            raw=raw,
        )
    return ParsedOutput(kind="text", text=text, raw=raw)


def _strip_fences(text: str) -> str:
    return re.sub(r"```[A-Za-z0-9_-]*", "", text)


def _loads(fragment: str) -> tuple[bool, Any]:
    try:
        return True, json.loads(fragment)
    except (ValueError, RecursionError):
        pass
    try:
        with warnings.catch_warnings():  # Python's parser warns about odd literals in model output
            warnings.simplefilter("ignore")
            return True, ast.literal_eval(fragment)
    except Exception:
        return False, None


def _json_candidates(text: str) -> Iterator[tuple[Any, int, int]]:
    """JSON values in the text, best first: whole text, fenced blocks, then embedded values."""
    ok, value = _loads(text)
    if ok:
        yield value, 0, len(text)
    for match in _FENCE.finditer(text):
        ok, value = _loads(match.group(1).strip())
        if ok:
            yield value, match.start(), match.end()
    decoder = json.JSONDecoder()
    tried = 0
    # A value inside a call the answer never finished (cut by max_tokens) is not the answer: the
    # "[]" in '[{"name": "f", "arguments": {"x": []' is an argument, not a refusal.
    cut_call = next((p for p in _unclosed_brackets(text) if _looks_like_call(text[p:])), len(text))
    for match in re.finditer(r"[\[{]", text):
        if tried >= _MAX_SCAN or match.start() > cut_call:
            break
        tried += 1
        try:
            value, end = decoder.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            continue
        yield value, match.start(), end


def structural_characters(text: str) -> Iterator[tuple[int, str]]:
    """The ``[ ] { } ,`` of ``text`` that stand outside JSON strings, with their positions.

    Example:
        >>> [c for _, c in structural_characters('{"a": "x, [y]", "b": [1]}')]
        ['{', ',', '[', ']', '}']
    """
    in_string = escaped = False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[]{},":
            yield index, char


def _unclosed_brackets(text: str) -> list[int]:
    """Positions of the ``[`` and ``{`` (outside JSON strings) that are never closed, in order."""
    stack: list[int] = []
    for index, char in structural_characters(text):
        if char in "[{":
            stack.append(index)
        elif char in "]}" and stack and text[stack[-1]] == {"]": "[", "}": "{"}[char]:
            stack.pop()
    return stack


def _call_items(value: Any) -> list[Any] | None:
    """The list of call items if ``value`` is call-shaped, else None."""
    if isinstance(value, dict):
        if isinstance(value.get("tool_calls"), list):
            value = value["tool_calls"]
        elif _is_call_item(value):
            return [value]
        else:
            return None
    if isinstance(value, list):
        if not value:
            return []
        if any(_is_call_item(v) for v in value) and all(isinstance(v, dict) for v in value):
            return value
    return None


def _is_call_item(item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    if isinstance(item.get("function"), dict):
        return "name" in item["function"]
    return "name" in item and ("arguments" in item or "parameters" in item or len(item) <= 2)


def items_to_calls(items: list[Any], raw: str) -> tuple[list[ToolCall], list[InvalidToolCall]]:
    """Call objects (``{name, arguments|parameters}`` or OpenAI ``{function: ...}``) to calls."""
    calls: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    for item in items:
        if isinstance(item.get("function"), dict):
            item = item["function"]
        name = item.get("name")
        args: Any = item.get("arguments", item.get("parameters", {}))
        args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False, default=str)
        if not isinstance(name, str) or not name.strip():
            invalid.append(InvalidToolCall(raw=raw, arguments=args_text, reason=f"call without a function name: {item!r:.200}"))
            continue
        if isinstance(args, str):
            ok, decoded = _loads(args) if args.strip() else (True, {})
            if not ok:
                invalid.append(InvalidToolCall(raw=raw, name=name, arguments=args, reason="arguments are not valid JSON"))
                continue
            args = decoded
        if args is None:
            args = {}
        if not isinstance(args, dict):
            invalid.append(InvalidToolCall(raw=raw, name=name, arguments=args_text,
                                           reason=f"arguments must be an object, got {type(args).__name__}"))
            continue
        calls.append(ToolCall(name=name.strip(), arguments=args))
    return calls, invalid


def _looks_like_call(text: str) -> bool:
    body = _strip_fences(text).lstrip()
    return body.startswith(("[{", "[ {", "[\n", "{")) or bool(_NAME.search(text))
