"""allOf of several schemas merged into one, against jsonschema as the oracle: a value the merged schema accepts is
exactly a value every part accepts; where that cannot be shown by one schema, a SchemaConversionError names the
keyword. And a tool with such a schema (Claude Code's SendMessage has one) converts, where it was refused."""

from __future__ import annotations

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hammer_plugins.tools import to_tool
from hammer_plugins.tools.all_of import merge_all_of
from hammer_plugins.values.errors import SchemaConversionError

STRINGS = ["", "a", "bb", "ccc", "dddd", "eeeee", "ffffffff", "a\nb", "x\ry\nzz"]
# Length-only patterns (zod writes .max(300) so) and one that refuses line breaks, as Claude Code's SendMessage.
# (No value ends in a line break: Python's $, which jsonschema uses, matches before one, ECMA's does not.)
PATTERNS = ["^[\\s\\S]{0,3}$", "^[\\s\\S]{2,}$", "^[\\S\\s]{1,5}$", "^[\\s\\S]+$", "^[^\\n\\r]*$", "^[a-e]*$"]
NUMBERS = [-3, 0, 1, 2.5, 4, 7, 10]


def string_part() -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries({"type": st.just("string")}, optional={
        "minLength": st.integers(0, 5), "maxLength": st.integers(2, 8),
        "enum": st.lists(st.sampled_from(STRINGS), min_size=1, max_size=4, unique=True),
        "pattern": st.sampled_from(PATTERNS),
        "description": st.sampled_from(["A name.", "Who gets it."])})


def number_part() -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries({"type": st.sampled_from(["integer", "number"])}, optional={
        "minimum": st.integers(-2, 5), "maximum": st.integers(0, 9)})


def object_part() -> st.SearchStrategy[dict]:
    props = st.dictionaries(st.sampled_from(["a", "b", "c"]), st.one_of(string_part(), number_part()), max_size=3)
    return props.flatmap(lambda p: st.fixed_dictionaries(
        {"type": st.just("object"), "properties": st.just(p)},
        optional={"required": st.lists(st.sampled_from(sorted(p) or ["a"]), unique=True, max_size=3),
                  "additionalProperties": st.booleans()}))


VALUES = [None, True, *STRINGS, *NUMBERS, {}, {"a": "bb"}, {"a": 4, "b": "ccc"}, {"a": "a", "b": 1, "c": "dddd"},
          {"b": 2.5}, {"c": "eeeee"}, {"a": 0, "c": -3}, {"d": 1}, {"a": "ffffffff", "b": "bb"}]


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.lists(string_part(), min_size=2, max_size=3), st.lists(number_part(), min_size=2, max_size=3),
                 st.lists(object_part(), min_size=2, max_size=3),
                 st.lists(st.one_of(string_part(), number_part()), min_size=2, max_size=2)))
def test_the_merged_schema_accepts_exactly_what_every_part_accepts(parts: list[dict]) -> None:
    try:
        merged = merge_all_of("t", "parameters.x", parts)
    except SchemaConversionError as exc:
        assert "allOf" in str(exc) and "Fix" in str(exc) or "merge the schemas" in str(exc)
        return
    for value in VALUES:
        every = jsonschema.Draft202012Validator({"allOf": parts}).is_valid(value)
        assert jsonschema.Draft202012Validator(merged).is_valid(value) == every, (parts, merged, value)


def test_a_tool_whose_parameter_is_an_allof_of_several_schemas_converts() -> None:
    tool = to_tool({"name": "SendMessage", "description": "Send a message to a teammate.", "parameters": {
        "type": "object", "required": ["to", "message"], "properties": {
            "to": {"allOf": [{"type": "string", "description": "The teammate's name."}, {"minLength": 1}]},
            "message": {"type": "string"}}}})
    assert tool.properties["to"] == {"type": "string", "description": "The teammate's name.", "minLength": 1}
    # Claude Code 2.1.332's SendMessage.to: two patterns, one of them a length bound.
    claude = to_tool({"name": "SendMessage", "parameters": {"type": "object", "properties": {"to": {"allOf": [
        {"type": "string", "pattern": "^[^\\n\\r]*$"}, {"type": "string", "pattern": "^[\\s\\S]{0,300}$"}]}}}})
    assert claude.properties["to"] == {"type": "string", "pattern": "^[^\\n\\r]*$", "maxLength": 300}


def test_parts_that_cannot_be_one_schema_are_refused_naming_the_keyword() -> None:
    with pytest.raises(SchemaConversionError, match="disagree on 'type'"):
        to_tool({"name": "t", "parameters": {"type": "object", "properties": {
            "x": {"allOf": [{"type": "string"}, {"type": "integer"}]}}}})
    with pytest.raises(SchemaConversionError, match="additionalProperties false"):
        merge_all_of("t", "p", [{"type": "object", "properties": {"a": {"type": "string"}},
                                 "additionalProperties": False},
                                {"type": "object", "properties": {"b": {"type": "string"}}}])


def test_a_huge_count_in_a_length_pattern_stays_a_pattern_and_never_raises_from_int() -> None:
    digits = "9" * 5000  # int() refuses more than 4,300 digits
    merged = merge_all_of("t", "p", [{"type": "string", "pattern": "^[\\s\\S]{0," + digits + "}$"},
                                     {"type": "string", "pattern": "^[\\s\\S]{0," + digits + "}$"}])
    assert merged["pattern"].endswith(digits + "}$")
