r"""``allOf`` of several schemas as one schema: what Hammer's prompt and the grammar can show.

Schema generators write ``allOf`` for a value that meets several schemas at once: zod's ``.and()`` and refinements,
pydantic's ``Annotated`` constraints on a reference, TypeScript intersections. Claude Code's own tools carry one
(``SendMessage.to``). Each part is normalized first; the merged schema keeps every part's constraints:

- equal values stay; ``required`` lists join; ``properties`` merge, a property in several parts merging in turn;
- lower bounds take the largest, upper bounds the smallest; ``type`` and ``enum`` keep what every part allows;
- descriptions (and titles) are joined; a pattern that only bounds the length (``^[\s\S]{0,300}$``) becomes
  ``maxLength``/``minLength``, so it meets another part's pattern;
- anything else the parts disagree on, an empty intersection, or a part closed with
  ``additionalProperties: false`` while another adds properties (JSON Schema would then refuse those) is not
  merged: :class:`~hammer_plugins.values.errors.SchemaConversionError` names the keyword.

Example:
    >>> merge_all_of("t", "parameters.to", [{"type": "string"}, {"type": "string", "minLength": 1}])
    {'type': 'string', 'minLength': 1}
    >>> merge_all_of("t", "p", [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    ...                         {"properties": {"b": {"type": "string"}}, "required": ["b"]}])["required"]
    ['a', 'b']
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from hammer_plugins.values.errors import SchemaConversionError

_LOWER = frozenset({"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"})
_UPPER = frozenset({"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"})
_TEXT = frozenset({"description", "title"})


def merge_all_of(tool: str, path: str, parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One schema meeting every normalized schema of ``parts`` (see the module)."""
    merged: dict[str, Any] = {}
    for part in map(_lengths_as_bounds, parts):
        for key, value in part.items():
            merged[key] = value if key not in merged else _merge_key(tool, path, key, merged[key], value)
    _check_closed(tool, path, parts, merged)
    return merged


def _merge_key(tool: str, path: str, key: str, old: Any, new: Any) -> Any:
    if old == new:
        return old
    if key == "required" and isinstance(old, list) and isinstance(new, list):
        return list(dict.fromkeys([*old, *new]))
    if key == "properties" and isinstance(old, dict) and isinstance(new, dict):
        both = dict(old)
        for name, schema in new.items():
            both[name] = schema if name not in both else merge_all_of(tool, f"{path}.{name}", [both[name], schema])
        return both
    if key in _TEXT and isinstance(old, str) and isinstance(new, str):
        return f"{old} {new}"
    if key in _LOWER and _number(old) and _number(new):
        return max(old, new)
    if key in _UPPER and _number(old) and _number(new):
        return min(old, new)
    if key == "type":
        allowed = [t for t in _listed(old) if t in _listed(new)]
        if allowed:
            return allowed[0] if len(allowed) == 1 else allowed
    if key == "enum" and isinstance(old, list) and isinstance(new, list):
        allowed = [v for v in old if v in new]
        if allowed:
            return allowed
    if key == "additionalProperties" and (old is False or new is False):
        return False
    raise SchemaConversionError(tool, f"{path}.allOf", f"the allOf schemas disagree on {key!r} ({old!r} and "
                                f"{new!r})"[:300], "merge the schemas into one object")


def _check_closed(tool: str, path: str, parts: Sequence[dict[str, Any]], merged: dict[str, Any]) -> None:
    """A part closed to other properties refuses those another part adds (JSON Schema's allOf): no merge shows
    that, so it is an error rather than a wider schema."""
    every = set(merged.get("properties", {}))
    for part in parts:
        if part.get("additionalProperties") is False and every - set(part.get("properties", {})):
            raise SchemaConversionError(tool, f"{path}.allOf", "an allOf part with additionalProperties false "
                                        "refuses the properties another part adds",
                                        "merge the schemas into one object")


# A pattern that only bounds the length: any character ([\s\S], as zod writes .max(300) on a string), a count.
_LENGTH_ONLY = re.compile(r"\^\[(?:\\s\\S|\\S\\s)\](?:\{(\d+)(?:(,)(\d*))?\}|(\*)|(\+))\$")


def _lengths_as_bounds(part: dict[str, Any]) -> dict[str, Any]:
    r"""``part`` with a pattern that only bounds the length written as ``minLength``/``maxLength`` (the same values
    match), so that it merges with another part's pattern: Claude Code's ``SendMessage.to`` holds
    ``^[^\n\r]*$`` and ``^[\s\S]{0,300}$``."""
    found = _LENGTH_ONLY.fullmatch(part["pattern"]) if isinstance(part.get("pattern"), str) else None
    if found is None or any(len(n or "") > 9 for n in (found.group(1), found.group(3))):
        return part  # (a count of ten digits or more stays a pattern: the schema limits check what it states)
    low, comma, high, star, plus = found.groups()
    bounds = {"minLength": 1} if plus else {} if star else {"minLength": int(low)}
    if not (star or plus) and (not comma or high):
        bounds["maxLength"] = int(high) if comma else int(low)
    kept = {k: v for k, v in part.items() if k != "pattern"}
    for key, value in bounds.items():
        kept[key] = value if key not in kept else _merge_key("", "", key, kept[key], value)
    if kept.get("minLength") == 0:
        kept.pop("minLength")
    return kept


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
