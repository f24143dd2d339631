"""The parser classifies every output and never raises."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hammer_plugins import parse_output

CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


@pytest.mark.parametrize(
    "text",
    [
        f"[{CALL}]",
        f"```\n[{CALL}]\n```",
        f"```json\n[\n    {CALL}\n]\n```",
        CALL,
        f'{{"tool_calls": [{CALL}]}}',
        '[{"name": "get_weather", "parameters": {"city": "Paris"}}]',
        '[{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}]',
        '[{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]',
        f"Sure! Here is the call:\n```json\n[{CALL}]\n```\nLet me know.",
        f"I will call it now: [{CALL}] done",
        "[{'name': 'get_weather', 'arguments': {'city': 'Paris'}}]",
    ],
)
def test_call_layouts(text: str) -> None:
    out = parse_output(text)
    assert out.kind == "tool_calls"
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("get_weather", {"city": "Paris"})]


def test_parallel_calls_get_unique_ids() -> None:
    out = parse_output(f"[{CALL}, {CALL}, {CALL}]")
    assert len(out.tool_calls) == 3
    assert len({c.id for c in out.tool_calls}) == 3


@pytest.mark.parametrize("text", ["[]", "```\n[]\n```", "[ ]", '{"tool_calls": []}', "No tool fits.\n[]"])
def test_refusals(text: str) -> None:
    assert parse_output(text).kind == "refusal"


def test_prose_stays_text() -> None:
    out = parse_output("Why did the tomato turn red? It saw the salad dressing!")
    assert out.kind == "text" and out.text.startswith("Why")
    assert parse_output("").kind == "text"
    assert parse_output("the list [1, 2, 3] is short").kind == "text"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('[{"name": "get_weather", "arguments": {"city": "Par', "not complete JSON"),
        ('```json\n[\n  {"name": "get_weather", "argu', "not complete JSON"),
        ('[{"name": "get_weather", "arguments": "{not json"}]', "not valid JSON"),
        ('[{"name": "get_weather", "arguments": [1, 2]}]', "must be an object"),
        ('[{"name": "", "arguments": {}}]', "without a function name"),
    ],
)
def test_invalid_calls_keep_raw_text_and_reason(text: str, reason: str) -> None:
    out = parse_output(text)
    assert out.kind == "invalid"
    assert out.invalid_tool_calls and reason in out.invalid_tool_calls[0].reason
    assert out.invalid_tool_calls[0].raw == text


def test_truncated_call_keeps_the_name() -> None:
    out = parse_output('[{"name": "send_email", "arguments": {"to": "a@b.c", "body": "hel')
    assert out.invalid_tool_calls[0].name == "send_email"


def test_mixed_valid_and_invalid() -> None:
    out = parse_output(f'[{CALL}, {{"name": "x", "arguments": 3}}]')
    assert out.kind == "tool_calls"
    assert len(out.tool_calls) == 1 and len(out.invalid_tool_calls) == 1


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_fuzz_any_text_never_raises(text: str) -> None:
    out = parse_output(text)
    assert out.kind in ("tool_calls", "refusal", "text", "invalid")


_json_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
_json = st.recursive(_json_leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                     max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_json, st.text(max_size=30), st.integers(min_value=0, max_value=200))
def test_fuzz_json_like_and_cut_outputs_never_raise(value: object, prose: str, cut: int) -> None:
    import json

    text = prose + json.dumps([{"name": "f", "arguments": value}]) + prose
    for candidate in (text, text[:cut], "```json\n" + text[:cut], "[" * cut):
        assert parse_output(candidate).kind in ("tool_calls", "refusal", "text", "invalid")
