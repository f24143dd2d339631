"""The grammar: its GBNF notation is valid for llama.cpp, its Lark notation for llguidance, and it accepts
exactly what it should (hand-picked cases; tests/unit/test_grammar_differential.py generates them).

Acceptance is checked with llguidance's matcher over the real Qwen2.5 vocabulary (token by token,
as during decoding), so a layout the model naturally writes is proven reachable.
"""

from __future__ import annotations

from typing import Any

import pytest
from grammar_oracles import LlamaCppGrammar, lark_accepts

from hammer_plugins import Tool, UnknownToolError
from hammer_plugins.grammar.builder import build_grammar

WEATHER = Tool(name="get_weather", parameters={
    "type": "object",
    "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                   "days": {"type": "integer"}},
    "required": ["city"],
})
EMAIL = Tool(name="send_email", parameters={
    "type": "object",
    "properties": {"to": {"type": "array", "items": {"type": "string"}}, "urgent": {"type": "boolean"},
                   "meta": {"type": "object", "properties": {"tag": {"type": "string"}, "score": {"type": "number"}},
                            "required": ["tag"]},
                   "note": {"type": "string", "nullable": True}},
    "required": ["to"],
})
TOOLS = [WEATHER, EMAIL]


accepts = lark_accepts


@pytest.fixture(scope="module")
def llama_grammar(default_model_path: str) -> Any:
    return LlamaCppGrammar(default_model_path)  # the tokenizer only (vocab_only): no model runs


@pytest.mark.parametrize("choice", ["auto", "required", "get_weather", "send_email"])
def test_llama_cpp_parses_every_mode_and_accepts_its_calls(choice: str, llama_grammar: Any) -> None:
    """llama.cpp's own grammar sampler parses each mode's GBNF (LlamaGrammar.from_string returned an object even for
    a grammar it could not parse, so it proved nothing) and accepts a call the mode allows, rejects one it does not."""
    gbnf = build_grammar(TOOLS, choice).gbnf
    weather = '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    email = '[{"name": "send_email", "arguments": {"to": ["a@b.c"]}}]'
    assert llama_grammar.accepts(gbnf, email if choice == "send_email" else weather)
    assert not llama_grammar.accepts(gbnf, weather if choice == "send_email" else '[{"name": "nope", "arguments": {}}]')


NATURAL = [
    '[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
    '[\n    {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n]',
    '```json\n[\n    {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}\n]\n```',
    '```\n[{"name": "send_email", "arguments": {"to": ["a@b.c"], "meta": {"tag": "x", "score": 1.5e3}}}]\n```',
    '[{"name": "send_email", "arguments": {"to": [], "urgent": true, "note": null}},'
    ' {"name": "get_weather", "arguments": {"city": "Ünïcode \\"q\\" 東京"}}]',
]


@pytest.mark.parametrize("text", NATURAL)
def test_auto_accepts_the_natural_layouts(qwen_lltokenizer: Any, text: str) -> None:
    assert accepts(qwen_lltokenizer, build_grammar(TOOLS, "auto"), text)


@pytest.mark.parametrize(
    "text",
    [
        '[{"name": "get_wether", "arguments": {"city": "Paris"}}]',  # unknown function
        '[{"name": "get_weather", "arguments": {}}]',  # required city missing
        '[{"name": "get_weather", "arguments": {"town": "Paris"}}]',  # unknown argument
        '[{"name": "get_weather", "arguments": {"city": 3}}]',  # wrong type
        '[{"name": "get_weather", "arguments": {"city": "Paris", "unit": "kelvin"}}]',  # not in enum
        '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 2.5}}]',  # integer
        '[{"name": "send_email", "arguments": {"to": ["a"], "meta": {"score": 1}}}]',  # nested required
        "Sure! [] ",  # prose
    ],
)
def test_auto_rejects_what_the_schema_forbids(qwen_lltokenizer: Any, text: str) -> None:
    assert not accepts(qwen_lltokenizer, build_grammar(TOOLS, "auto"), text)


def test_modes(qwen_lltokenizer: Any) -> None:
    call = '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    other = '[{"name": "send_email", "arguments": {"to": ["a"]}}]'
    assert accepts(qwen_lltokenizer, build_grammar(TOOLS, "auto"), "[]")
    assert accepts(qwen_lltokenizer, build_grammar(TOOLS, "auto"), "```\n[]\n```")
    assert not accepts(qwen_lltokenizer, build_grammar(TOOLS, "required"), "[]")
    assert accepts(qwen_lltokenizer, build_grammar(TOOLS, "required"), other)
    forced = build_grammar(TOOLS, "get_weather")
    assert accepts(qwen_lltokenizer, forced, call)
    assert not accepts(qwen_lltokenizer, forced, other)
    assert not accepts(qwen_lltokenizer, forced, "[]")
    two = call[:-1] + ", " + call[1:]
    assert accepts(qwen_lltokenizer, build_grammar(TOOLS, "auto"), two)
    assert not accepts(qwen_lltokenizer, build_grammar(TOOLS, "auto", parallel=False), two)


def test_unknown_forced_tool() -> None:
    with pytest.raises(UnknownToolError, match="not among the bound tools"):
        build_grammar(TOOLS, "get_time")


def test_odd_names_are_escaped(qwen_lltokenizer: Any) -> None:
    tool = Tool(name='we"ird.name\\x', parameters={"type": "object", "properties": {'k"1': {"type": "string"}},
                                                     "required": ['k"1']})
    text = '[{"name": "we\\"ird.name\\\\x", "arguments": {"k\\"1": "v"}}]'
    assert accepts(qwen_lltokenizer, build_grammar([tool], "required"), text)


def test_json_grammar_follows_the_schema(qwen_lltokenizer: Any) -> None:
    from hammer_plugins.grammar.builder import build_json_grammar

    schema = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
              "required": ["name"]}
    grammar = build_json_grammar(schema)
    assert accepts(qwen_lltokenizer, grammar, '{\n  "name": "Ada",\n  "age": 36\n}')
    assert not accepts(qwen_lltokenizer, grammar, '{"age": 36}')
    assert accepts(qwen_lltokenizer, build_json_grammar(None), '{"anything": [1, {"x": null}]}')


def test_key_order_makes_a_different_tool(qwen_lltokenizer: Any) -> None:
    """The grammar pins declaration order, so a cached grammar must never serve a reordered schema."""
    from hammer_plugins import HammerEngine
    from hammer_plugins.backends.scripted import ScriptedBackend

    a = {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "string"}},
                                     "required": ["x", "y"]}}
    b = {"name": "f", "parameters": {"type": "object", "properties": {"y": {"type": "string"}, "x": {"type": "string"}},
                                     "required": ["x", "y"]}}
    engine = HammerEngine(backend=ScriptedBackend([]))
    first, second = engine.bind([a]), engine.bind([b])
    assert first.grammar("auto", True) != second.grammar("auto", True)
    assert '"y"' in second.prefix.split('"x"')[0]  # the prompt shows b's order
    text = '[{"name": "f", "arguments": {"y": "1", "x": "2"}}]'
    assert accepts(qwen_lltokenizer, second.grammar("auto", True), text)
    assert not accepts(qwen_lltokenizer, first.grammar("auto", True), text)
