"""Tool schema conversion and Hammer rendering."""

from __future__ import annotations

import enum
import json
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from hammer_plugins import SchemaConversionError, SchemaLimitError, Tool, to_tool, to_tools
from hammer_plugins.prompt.tools_block import hammer_entry, render_tools_block
from hammer_plugins.tools.docstrings import parse_docstring

WEATHER_OPENAI = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["c", "f"], "default": "c", "description": "Unit"},
            },
            "required": ["city"],
        },
    },
}


def test_openai_wrapped_and_bare_give_the_same_tool() -> None:
    wrapped = Tool.from_openai(WEATHER_OPENAI)
    bare = to_tool(WEATHER_OPENAI["function"])
    assert wrapped == bare
    assert wrapped.required == ["city"]
    assert list(wrapped.properties) == ["city", "unit"]


def test_hammer_rendering_follows_the_reference_rules() -> None:
    """Keys in the order given, required marked, the default kept and appended with no separator
    (bfcl-eval's HammerHandler; tests/bench/test_prompt_parity.py checks every BFCL entry against it)."""
    rendered = hammer_entry(Tool.from_openai(WEATHER_OPENAI))
    assert rendered == {
        "name": "get_weather",
        "description": "Get the weather",
        "parameters": {
            "city": {"type": "string", "description": "City name", "required": True},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c", "description": "Unitdefault is 'c'"},
        },
    }
    assert list(rendered["parameters"]["unit"]) == ["type", "enum", "default", "description"]
    # The tools block is plain json.dumps of the list, as in Hammer's client and BFCL's handler.
    assert json.loads(render_tools_block([Tool.from_openai(WEATHER_OPENAI)])) == [rendered]


def test_json_schema_with_title() -> None:
    tool = Tool.from_json_schema({"title": "search", "description": "Search", "type": "object",
                                  "properties": {"q": {"type": "string"}}, "required": ["q"]})
    assert (tool.name, tool.description, tool.required) == ("search", "Search", ["q"])
    assert to_tool({"title": "search", "type": "object", "properties": {}}).name == "search"


class Unit(str, enum.Enum):  # noqa: UP042 - the (str, Enum) users still write
    C = "celsius"
    F = "fahrenheit"


class Address(BaseModel):
    street: str
    zip_code: str | None = None


class Booking(BaseModel):
    """Book a table."""

    name: str = Field(description="Guest name")
    guests: int = Field(2, description="Number of guests")
    tags: list[str] = Field(default_factory=list, description="Tags")
    address: Address
    unit: Unit = Unit.C
    note: str | None = None


def test_pydantic_nested_array_enum_optional_survive() -> None:
    tool = Tool.from_pydantic(Booking)
    assert tool.name == "Booking" and tool.description == "Book a table."
    props = tool.properties
    assert props["guests"] == {"default": 2, "description": "Number of guests", "type": "integer"}
    assert props["tags"]["type"] == "array" and props["tags"]["items"] == {"type": "string"}
    assert props["address"]["type"] == "object"
    assert set(props["address"]["properties"]) == {"street", "zip_code"}
    assert props["address"]["required"] == ["street"]
    assert props["address"]["properties"]["zip_code"]["type"] == "string"
    assert props["address"]["properties"]["zip_code"]["nullable"] is True
    assert props["unit"]["enum"] == ["celsius", "fahrenheit"]
    assert props["note"]["type"] == "string" and props["note"]["nullable"] is True
    assert sorted(tool.required) == ["address", "name"]
    rendered = hammer_entry(tool)["parameters"]
    # A nested object renders as its properties, its own required ones marked (the reference's rule).
    assert rendered["address"]["street"] == {"type": "string", "required": True}
    assert rendered["name"]["required"] is True and "required" not in rendered["note"]
    assert rendered["guests"]["description"] == "Number of guestsdefault is '2'"
    # Round trip: the OpenAI form converts back to the same tool.
    assert Tool.from_openai(tool.to_openai()) == tool


def test_function_with_google_docstring() -> None:
    def book(city: str, nights: int = 1, kind: Literal["hotel", "hostel"] = "hotel",
             extras: list[str] | None = None) -> str:
        """Book a room.

        Longer text that is not the summary.

        Args:
            city: Where to stay.
            nights: How many nights,
                at least one.
            kind: Type of place.
            extras: Optional extras.

        Returns:
            A confirmation.
        """
        return ""

    tool = Tool.from_function(book)
    assert tool.name == "book" and tool.description == "Book a room."
    assert tool.properties["city"] == {"type": "string", "description": "Where to stay."}
    assert tool.properties["nights"]["description"] == "How many nights, at least one."
    assert tool.properties["kind"]["enum"] == ["hotel", "hostel"]
    assert tool.properties["extras"]["type"] == "array"
    assert tool.required == ["city"]


def test_rest_docstring() -> None:
    summary, args = parse_docstring("Do it.\n\n:param x: the x\n:param int y: the y\n:returns: nothing")
    assert summary == "Do it."
    assert args == {"x": "the x", "y": "the y"}


def test_recursive_schema_names_tool_and_field() -> None:
    class Node(BaseModel):
        value: int
        children: list[Node] = []

    with pytest.raises(SchemaConversionError) as info:
        Tool.from_pydantic(Node)
    assert info.value.tool == "Node"
    assert "children" in info.value.field
    assert "Fix" in str(info.value)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"type": "object", "properties": {"x": {"not": {"type": "string"}}}}, "x.not"),
        ({"type": "object", "properties": {"x": {"type": "date"}}}, "x.type"),
        ({"type": "object", "properties": {"x": {"$ref": "#/$defs/Missing"}}}, "x"),
        ({"type": "object", "properties": {}, "required": ["ghost"]}, "parameters.required"),
        ({"type": "array"}, "parameters.type"),
    ],
)
def test_unrenderable_constructs_raise_with_tool_and_field(params: dict, field: str) -> None:
    with pytest.raises(SchemaConversionError) as info:
        Tool(name="bad_tool", parameters=params)
    assert info.value.tool == "bad_tool"
    assert info.value.field == field


def test_duplicate_names_and_unknown_objects() -> None:
    with pytest.raises(SchemaConversionError, match="unique"):
        to_tools([WEATHER_OPENAI, WEATHER_OPENAI])
    with pytest.raises(SchemaConversionError, match="cannot turn"):
        to_tool(42)


# ------------------------------------------------------------------ a repeated tool set is converted once
def _weather_set() -> list[dict]:
    import copy

    return copy.deepcopy([WEATHER_OPENAI, {"name": "ping", "parameters": {"type": "object", "properties": {}}}])


def test_a_repeated_tool_set_is_converted_once(monkeypatch) -> None:
    from hammer_plugins.tools import definition

    definition._CONVERTED.clear()
    first = definition.convert_tools(_weather_set())
    calls = []
    monkeypatch.setattr(definition, "to_tool", lambda obj: calls.append(obj))  # a conversion would be seen
    again = definition.convert_tools(_weather_set())  # equal content, new objects: as a new request body
    assert again is first and calls == []
    assert again.prints == tuple(t.fingerprint() for t in again.tools)


def test_a_changed_tool_set_or_other_limits_convert_again() -> None:
    from hammer_plugins.tools import definition
    from hammer_plugins.tools.limits import SchemaLimits, schema_limits

    definition._CONVERTED.clear()
    first = definition.convert_tools(_weather_set())
    changed = _weather_set()
    changed[1]["description"] = "Ping it."
    assert definition.convert_tools(changed).tools[1].description == "Ping it."
    reordered = _weather_set()[::-1]
    assert [t.name for t in definition.convert_tools(reordered).tools] == ["ping", first.tools[0].name]
    with schema_limits(SchemaLimits(max_schema_nodes=1)), pytest.raises(SchemaLimitError):
        definition.convert_tools(_weather_set())  # a cached set is still held to the budgets in force


def test_an_invalid_tool_set_is_refused_every_time() -> None:
    from hammer_plugins.tools import definition

    twins = [{"name": "ping", "parameters": {}}, {"name": "ping", "parameters": {}}]
    for _ in range(2):
        with pytest.raises(SchemaConversionError, match="two tools share this name"):
            definition.convert_tools(twins)
