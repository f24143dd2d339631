"""The parser classifies every output and never raises."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from hammer_plugins import parse_output
from hammer_plugins.output.parsing import ParsedOutput

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


def consistent(out: ParsedOutput, text: str) -> None:
    """What every parse result must satisfy: the kind agrees with what was found, and nothing is lost."""
    assert out.raw == text
    assert (out.kind == "tool_calls") == bool(out.tool_calls)
    if out.kind == "invalid":
        assert out.invalid_tool_calls
    if out.kind in ("refusal", "text"):
        assert not out.invalid_tool_calls
    for bad in out.invalid_tool_calls:
        assert bad.reason and bad.raw
    assert len({c.id for c in out.tool_calls + out.invalid_tool_calls}) == len(out.tool_calls) + len(out.invalid_tool_calls)


@settings(max_examples=examples(400), deadline=None)
@given(st.text())
def test_fuzz_any_text_gives_a_consistent_result(text: str) -> None:
    consistent(parse_output(text), text)


_name = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,15}", fullmatch=True)
_json_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20)
_json = st.recursive(_json_leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                     max_leaves=20)
_calls = st.lists(st.fixed_dictionaries({"name": _name, "arguments": st.dictionaries(st.text(max_size=8), _json, max_size=4)}),
                  max_size=4)
_prose = st.sampled_from(["", "Sure!\n", "Here you go:\n", "I will call the tool.\n"])


def _layout(calls: list[dict[str, object]], style: int) -> str:
    import json

    body = json.dumps(calls, ensure_ascii=style % 2 == 0, indent=4 if style in (1, 3) else None)
    return body if style < 2 else ("```\n" if style == 2 else "```json\n") + body + "\n```"


@settings(max_examples=examples(300), deadline=None)
@given(_calls, st.integers(0, 3), _prose)
def test_fuzz_every_layout_of_a_call_list_parses_back_to_it(calls: list[dict[str, object]], style: int, prose: str) -> None:
    text = prose + _layout(calls, style)
    out = parse_output(text)
    consistent(out, text)
    if calls:
        assert out.kind == "tool_calls"
        assert [{"name": c.name, "arguments": c.arguments} for c in out.tool_calls] == calls
    else:
        assert out.kind == "refusal"


@settings(max_examples=examples(300), deadline=None)
@given(_calls.filter(bool), st.integers(0, 3), st.data())
def test_fuzz_a_cut_answer_never_invents_a_call(calls: list[dict[str, object]], style: int, data: st.DataObject) -> None:
    text = _layout(calls, style)
    cut = text[: data.draw(st.integers(0, len(text) - 1))]
    out = parse_output(cut)
    consistent(out, cut)
    found = [{"name": c.name, "arguments": c.arguments} for c in out.tool_calls]
    assert found == calls[: len(found)]  # only calls that were complete before the cut, in order
    assert out.kind != "refusal" or cut.strip(" `json\n") in ("[", "[]")
