"""Function masking: opaque names in, real names out, unknown names never mapped to a real tool."""

from __future__ import annotations

from hammer_plugins import InvalidToolCall, Tool, ToolCall
from hammer_plugins.prompt.render import render_prefix
from hammer_plugins.prompt.tools_block import hammer_entry
from hammer_plugins.tools.masking import NameMask

TOOLS = [
    Tool(name="get_weather", description="Weather for a city",
         parameters={"type": "object", "properties": {"city": {"type": "string"},
                                                      "unit": {"type": "string", "default": "c", "description": "Unit"}},
                     "required": ["city"]}),
    Tool(name="send_email", description="Send mail",
         parameters={"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}}),
]


def test_deterministic_and_collision_free() -> None:
    first, second = NameMask.for_tools(TOOLS), NameMask.for_tools(TOOLS)
    assert first == second
    assert render_prefix(first.masked_tools) == render_prefix(second.masked_tools)
    names = [t.name for t in first.masked_tools]
    assert len(set(names)) == len(names)
    assert not set(names) & {t.name for t in TOOLS}
    for tool in first.masked_tools:
        assert 5 <= len(tool.name) <= 15
        assert all(4 <= len(p) <= 10 for p in tool.properties)
    other = NameMask.for_tools(TOOLS[:1])
    assert other.masked_tools[0].name != "get_weather"


def test_only_names_change() -> None:
    mask = NameMask.for_tools(TOOLS)
    weather = mask.masked_tools[0]
    assert weather.description == "Weather for a city"
    assert list(weather.properties.values()) == list(TOOLS[0].properties.values())
    assert len(weather.required) == 1 and weather.required[0] != "city"
    # The default renders as for any tool (the reference prompt's rule), under the masked name.
    unit = hammer_entry(weather)["parameters"][list(weather.properties)[1]]
    assert unit == {"type": "string", "default": "c", "description": "Unitdefault is 'c'"}


def test_unmask_restores_names_and_values_exactly() -> None:
    mask = NameMask.for_tools(TOOLS)
    masked = mask.masked_tools[1]
    p_to, p_body = list(masked.properties)
    call = ToolCall(name=masked.name, arguments={p_to: "bob@x.com", p_body: {"nested": [1, 2.5, None]}})
    real = mask.unmask(call)
    assert isinstance(real, ToolCall)
    assert real.name == "send_email" and real.id == call.id
    assert real.arguments == {"to": "bob@x.com", "body": {"nested": [1, 2.5, None]}}
    assert mask.mask_call(real) == call


def test_unknown_masked_names_become_invalid() -> None:
    mask = NameMask.for_tools(TOOLS)
    assert isinstance(mask.unmask(ToolCall(name="get_weather", arguments={})), InvalidToolCall)
    assert isinstance(mask.unmask(ToolCall(name="zzzzzz", arguments={})), InvalidToolCall)
    masked = mask.masked_tools[0]
    bad = mask.unmask(ToolCall(name=masked.name, arguments={"city": "Paris"}))
    assert isinstance(bad, InvalidToolCall) and "unknown masked parameter" in bad.reason
