"""The value keywords (issue 32): ``pattern``, ``minLength``/``maxLength``, ``minimum``/``maximum``/
``exclusiveMinimum``/``exclusiveMaximum``, ``multipleOf``, ``minItems``/``maxItems``, ``uniqueItems`` and
``format`` (date, date-time, time, email, uuid, ipv4, uri), checked against ``jsonschema`` as the oracle.

Generated tools use every keyword; a generated valid call is accepted by both notations of the grammar
(Lark through llguidance, GBNF through llama.cpp's own grammar engine) and passes the check after
decoding; a generated call broken on one keyword is refused by each engine: its grammar refuses it, or the
check after decoding names the broken keyword (never a silent pass). What each notation leaves to the
check is documented in ``docs/engine.md`` ("Schema keywords").
"""

from __future__ import annotations

import datetime
import json
import os
import re
import warnings
from collections import Counter
from typing import Any

import jsonschema
import pytest
from grammar_oracles import FORMAT_CHECKER, RFC3986_URI, LlamaCppGrammar, lark_accepts_each
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from installed import require

from hammer_plugins import HammerEngine, Message, Tool
from hammer_plugins.backends.scripted import ScriptedBackend
from hammer_plugins.grammar.builder import build_grammar, build_json_grammar
from hammer_plugins.grammar.keyword_check import keyword_violation
from hammer_plugins.grammar.keywords import FORMATS as ENGINE_FORMATS
from hammer_plugins.grammar.keywords import SchemaKeywordWarning
from hammer_plugins.tools.limits import SchemaLimits, schema_limits
from hammer_plugins.values.errors import SchemaConversionError

VALID_EXAMPLES = 150
INVALID_EXAMPLES = 250
CASES = settings(max_examples=examples(VALID_EXAMPLES), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])

# ------------------------------------------------------------------ the oracle
def oracle_valid(schema: dict[str, Any], value: Any) -> bool:
    return jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER).is_valid(value)


def oracle_errors(schema: dict[str, Any], value: Any) -> set[str]:
    validator = jsonschema.Draft202012Validator(schema, format_checker=FORMAT_CHECKER)
    return {e.validator for e in validator.iter_errors(value)}  # type: ignore[misc]


# ------------------------------------------------------------------ generated schemas and values
# Strings a pattern or format constrains are written raw (the grammar's promise): printable ASCII but " and \.
RAW_ASCII = st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters='"\\')
PATTERNS = ["^[A-Z]{2}-[0-9]{3}$", "^[a-z]+$", "ab", r"^\d{3}", "[0-9]$", "^(foo|bar)[0-9]?$",
            r"^[a-z0-9_.-]+@[a-z]+\.[a-z]{2,3}$", "x.y", r"^\w+( \w+)*$", "^[^0-9]*$"]
FORMATS = ["date", "date-time", "time", "email", "uuid", "ipv4", "uri"]


@st.composite
def string_schemas(draw: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    kind = draw(st.sampled_from(["length", "pattern", "format", "pattern+length"]))
    if "length" in kind:
        low = draw(st.integers(0, 4))
        if draw(st.booleans()):
            schema["minLength"] = low
        if draw(st.booleans()) or "minLength" not in schema:
            schema["maxLength"] = low + draw(st.integers(0, 6))
    if "pattern" in kind:
        schema["pattern"] = draw(st.sampled_from(PATTERNS))
        if "maxLength" in schema:
            schema["maxLength"] = max(schema["maxLength"], 10)
    if kind == "format":
        schema["format"] = draw(st.sampled_from(FORMATS))
    return schema


def _bound(draw: Any) -> int | float:
    return draw(st.integers(-1000, 1000) | st.sampled_from([-2.5, 0.5, 7.25, 100.0]))


@st.composite
def number_schemas(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["integer", "number"]))
    schema: dict[str, Any] = {"type": kind}
    low = _bound(draw)
    high = low + draw(st.integers(2, 5000))
    if draw(st.booleans()):
        schema[draw(st.sampled_from(["minimum", "exclusiveMinimum"]))] = low
    if draw(st.booleans()):
        schema[draw(st.sampled_from(["maximum", "exclusiveMaximum"]))] = high
    if draw(st.integers(0, 2)) == 0:
        schema["multipleOf"] = draw(st.sampled_from([2, 3, 5]) if kind == "integer" else st.sampled_from([0.5, 0.25, 2]))
    return schema


@st.composite
def array_schemas(draw: Any) -> dict[str, Any]:
    items = draw(st.sampled_from([{"type": "integer", "minimum": 0, "maximum": 9}, {"type": "string", "maxLength": 3},
                                  {"type": "string", "enum": ["a", "b", "c", "d"]}]))
    schema: dict[str, Any] = {"type": "array", "items": items}
    low = draw(st.integers(0, 2))
    if low:
        schema["minItems"] = low
    if draw(st.booleans()):
        schema["maxItems"] = low + draw(st.integers(0, 3))
    if draw(st.booleans()):
        schema["uniqueItems"] = True
    return schema


KEYWORD_SCHEMAS = st.one_of(string_schemas(), number_schemas(), array_schemas())


@st.composite
def tools(draw: Any) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["a", "b_1", "when", "code", "n", "tags"]), min_size=1, max_size=3,
                          unique=True))
    properties = {name: draw(KEYWORD_SCHEMAS) for name in names}
    return {"name": "f", "parameters": {"type": "object", "properties": properties, "required": names}}


def _format_values(fmt: str) -> st.SearchStrategy[str]:
    digits2 = st.integers(0, 23).map(lambda h: f"{h:02d}")
    offset = st.sampled_from(["Z", "z", "+01:00", "-05:30", "+00:00"])
    time = st.builds(lambda h, m, s, frac, off: f"{h}:{m:02d}:{s:02d}{frac}{off}", digits2, st.integers(0, 59),
                     st.integers(0, 59), st.sampled_from(["", ".5", ".123"]), offset)
    date = st.dates(datetime.date(1000, 1, 1), datetime.date(9999, 12, 31)).map(lambda d: d.isoformat())
    return {
        "date": date,
        "time": time,
        "date-time": st.builds(lambda d, sep, t: f"{d}{sep}{t}", date, st.sampled_from(["T", "t"]), time),
        "email": st.from_regex(r"[a-z0-9._+-]{1,8}@[a-z0-9]{1,6}\.[a-z]{2,3}", fullmatch=True).filter(
            lambda e: ".." not in e and not e.startswith(".") and ".@" not in e),
        "uuid": st.uuids().map(str) | st.uuids().map(lambda u: str(u).upper()),
        "ipv4": st.ip_addresses(v=4).map(str),
        "uri": st.from_regex(r"(https?|mailto|urn):[A-Za-z0-9/._~?=&%-]{0,12}", fullmatch=True).filter(
            lambda u: bool(RFC3986_URI.match(u))),
    }[fmt]


def valid_values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    kind = schema.get("type")
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if kind == "string":
        if "format" in schema:
            base = _format_values(schema["format"])
        elif "pattern" in schema:
            # (Python's $ also matches before a final newline, ECMA-262's does not: not a valid value.)
            base = st.from_regex(schema["pattern"], alphabet=RAW_ASCII).filter(lambda v: not v.endswith("\n"))
        else:
            base = st.text(st.characters(exclude_categories=("Cs",)), max_size=schema.get("maxLength", 8) + 1)
        return base.filter(lambda v: oracle_valid(schema, v))
    if kind in ("integer", "number"):
        step = schema.get("multipleOf", 1 if kind == "integer" else None)
        low = min([v for k, v in schema.items() if k in ("minimum", "exclusiveMinimum")] or [-10**6])
        high = max([v for k, v in schema.items() if k in ("maximum", "exclusiveMaximum")] or [10**6])
        if step is not None:
            values = st.integers(int(low / step) - 1, int(high / step) + 1).map(lambda k: k * step)
        else:
            values = st.floats(low, high, allow_nan=False) | st.integers(int(low) - 1, int(high) + 1)
        if kind == "integer":
            values = values.map(int)
        return values.filter(lambda v: oracle_valid(schema, v))
    items = valid_values(schema["items"])
    low, high = schema.get("minItems", 0), schema.get("maxItems", schema.get("minItems", 0) + 3)
    if schema.get("uniqueItems"):
        return st.lists(items, min_size=low, max_size=high, unique=True)
    return st.lists(items, min_size=low, max_size=high)


def invalid_values(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the right type that break one of the schema's value keywords (the oracle decides)."""
    kind = schema.get("type")
    if kind == "string":
        base = (st.text(RAW_ASCII, max_size=14) | st.text(st.characters(exclude_categories=("Cs",)), max_size=14)
                | st.text(RAW_ASCII, max_size=2))
        if "format" in schema:
            base = base | _format_values(schema["format"]).map(_break_format)
    elif kind in ("integer", "number"):
        bounds = [v for k, v in schema.items() if k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")]
        near = [b + d for b in bounds for d in (-1, -0.5, 0, 0.5, 1)] or [1]
        base = st.integers(-10**5, 10**5) | st.sampled_from(near).map(lambda v: int(v) if kind == "integer" else v)
        if kind == "number":
            base = base | st.floats(-10**4, 10**4, allow_nan=False)
    else:
        item = schema["items"]
        base = st.lists(valid_values(item), max_size=6) | st.lists(st.integers(-3, 12) if item["type"] == "integer"
                                                                   else st.text("abcdxyz", max_size=5), max_size=6)
    return base.filter(lambda v: not oracle_valid(schema, v))


def _break_format(text: str) -> str:
    """A near miss of a formatted value: one character changed or dropped, or the value cut."""
    if not text:
        return "x"
    return re.sub(r"[0-9]", "9", text, count=1) if text[0].isdigit() and len(text) > 3 else text[: len(text) // 2]


@st.composite
def valid_calls(draw: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    tool = draw(tools())
    arguments = {k: draw(valid_values(s)) for k, s in tool["parameters"]["properties"].items()}
    return tool, arguments


@st.composite
def invalid_calls(draw: Any) -> tuple[dict[str, Any], dict[str, Any], str, set[str]]:
    tool, arguments = draw(valid_calls())
    props = tool["parameters"]["properties"]
    key = draw(st.sampled_from(sorted(props)))
    arguments[key] = draw(invalid_values(props[key]))
    broken = oracle_errors(props[key], arguments[key])
    assume(broken)
    return tool, arguments, key, broken


# ------------------------------------------------------------------ engines
@pytest.fixture(scope="module")
def llama_cpp_grammar(default_model_path: str) -> LlamaCppGrammar:
    return LlamaCppGrammar(default_model_path)


def _texts(arguments: dict[str, Any]) -> list[str]:
    calls = [{"name": "f", "arguments": arguments}]
    return [json.dumps(calls, ensure_ascii=False), json.dumps(calls, ensure_ascii=False, indent=2)]


def _grammar(tool: dict[str, Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SchemaKeywordWarning)
        return build_grammar([Tool.from_openai(tool)], "required")


@CASES
@given(case=valid_calls())
def test_every_valid_call_is_accepted(case: Any, qwen_lltokenizer: Any, llama_cpp_grammar: LlamaCppGrammar) -> None:
    tool, arguments = case
    assert oracle_valid(tool["parameters"], arguments), "the generator made an invalid call"
    grammar = _grammar(tool)
    texts = _texts(arguments)
    assert lark_accepts_each(qwen_lltokenizer, grammar, texts) == [True] * len(texts), texts[0]
    assert all(llama_cpp_grammar.accepts(grammar.gbnf, t) for t in texts), texts[0]
    assert keyword_violation(Tool.from_openai(tool).parameters, arguments) is None
    COUNTS["valid"] += 1


def grammar_refuses(schema: dict[str, Any], value: Any, broken: set[str], notation: str) -> bool:
    """Whether the ``notation`` grammar itself refuses a value breaking ``broken`` (what docs/engine.md promises)."""
    kind = schema["type"]
    enforced: set[str] = set()
    if kind == "integer":
        enforced = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
    elif kind == "string":
        enforced = {"pattern"}
        if notation == "lark" or "pattern" not in schema:
            enforced |= {"minLength", "maxLength"}
        if "format" in schema and not re.fullmatch(ENGINE_FORMATS[schema["format"]], value):
            enforced.add("format")
    elif kind == "array":
        enforced = {"minItems", "maxItems", "minimum", "maximum", "maxLength", "enum", "type"}
    return bool(broken & enforced)


VALUE_KEYWORDS = {"pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                  "multipleOf", "minItems", "maxItems", "uniqueItems", "format"}
COUNTS: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def _report_counts() -> Any:
    yield
    target = os.environ.get("HAMMER_KEYWORD_COUNTS")
    if target:
        with open(target, "a", encoding="utf-8") as out:
            out.write(json.dumps(dict(sorted(COUNTS.items()))) + "\n")


@settings(CASES, max_examples=examples(INVALID_EXAMPLES))
@given(case=invalid_calls())
def test_every_broken_call_is_refused(case: Any, qwen_lltokenizer: Any, llama_cpp_grammar: LlamaCppGrammar) -> None:
    """Refused on each engine: by its grammar where the notation expresses the keyword, else by the check
    after decoding, which names the keyword (never a silent pass)."""
    tool, arguments, key, broken = case
    schema = tool["parameters"]["properties"][key]
    grammar = _grammar(tool)
    text = _texts(arguments)[0]
    found = keyword_violation(Tool.from_openai(tool).parameters, arguments)
    if broken & VALUE_KEYWORDS:
        assert found is not None and found[0].split("[")[0] == key and found[1] in broken, (text, broken, found)
    else:  # an enum member or a type broken inside an array: the grammar's own business
        assert found is None
    lark_ok = lark_accepts_each(qwen_lltokenizer, grammar, [text])[0]
    gbnf_ok = llama_cpp_grammar.accepts(grammar.gbnf, text)
    assert lark_ok is not grammar_refuses(schema, arguments[key], broken, "lark"), (text, broken)
    assert gbnf_ok is not grammar_refuses(schema, arguments[key], broken, "gbnf"), (text, broken)
    COUNTS["invalid"] += 1
    COUNTS["invalid refused by the Lark grammar"] += not lark_ok
    COUNTS["invalid refused by the GBNF grammar"] += not gbnf_ok
    for keyword in broken:
        COUNTS[f"broken {keyword}"] += 1


# ------------------------------------------------------------------ fixed cases
EVERY_KEYWORD = {"type": "object", "properties": {
    "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
    "name": {"type": "string", "minLength": 2, "maxLength": 5},
    "day": {"type": "string", "format": "date"},
    "at": {"type": "string", "format": "date-time"},
    "clock": {"type": "string", "format": "time"},
    "mail": {"type": "string", "format": "email"},
    "id": {"type": "string", "format": "uuid"},
    "ip": {"type": "string", "format": "ipv4"},
    "url": {"type": "string", "format": "uri"},
    "n": {"type": "integer", "minimum": 1, "maximum": 10},
    "m": {"type": "integer", "exclusiveMinimum": -5, "exclusiveMaximum": 100, "multipleOf": 5},
    "x": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3, "uniqueItems": True},
}}
GOOD = {"code": "AB-123", "name": "Ann", "day": "2024-02-29", "at": "2024-02-29T23:59:59.5+01:00",
        "clock": "08:30:00Z", "mail": "ann.lee@example.org", "id": "123e4567-e89b-12d3-a456-426614174000",
        "ip": "192.168.0.1", "url": "https://example.org/a?b=1#c", "n": 10, "m": 95, "x": 0.5, "tags": ["a", "b"]}
# One broken keyword each: (argument, value, keyword, refused by the Lark grammar, refused by the GBNF grammar).
BROKEN = [
    ("code", "ab-123", "pattern", True, True), ("name", "A", "minLength", True, True),
    ("name", "Annabel", "maxLength", True, True), ("day", "2024-13-01", "format", True, True),
    ("day", "2023-02-29", "format", False, False), ("at", "2024-02-29 23:59:59Z", "format", True, True),
    ("clock", "24:00:00Z", "format", True, True), ("mail", "ann", "format", True, True),
    ("id", "123e4567", "format", True, True), ("ip", "256.1.1.1", "format", True, True),
    ("url", "no scheme", "format", True, True), ("n", 0, "minimum", True, True), ("n", 11, "maximum", True, True),
    ("m", -5, "exclusiveMinimum", True, True), ("m", 100, "exclusiveMaximum", True, True),
    ("m", 7, "multipleOf", False, False), ("x", -0.5, "minimum", False, False), ("x", 1, "exclusiveMaximum", False, False),
    ("tags", [], "minItems", True, True), ("tags", ["a", "b", "c", "d"], "maxItems", True, True),
    ("tags", ["a", "a"], "uniqueItems", False, False),
]


def test_a_tool_with_every_keyword(qwen_lltokenizer: Any, llama_cpp_grammar: LlamaCppGrammar) -> None:
    tool = {"name": "f", "parameters": EVERY_KEYWORD}
    assert oracle_valid(EVERY_KEYWORD, GOOD)
    grammar = _grammar(tool)
    texts = _texts(GOOD)
    assert lark_accepts_each(qwen_lltokenizer, grammar, texts) == [True, True]
    assert all(llama_cpp_grammar.accepts(grammar.gbnf, t) for t in texts)
    for key, value, keyword, lark_refuses, gbnf_refuses in BROKEN:
        arguments = {**GOOD, key: value}
        assert keyword in oracle_errors(EVERY_KEYWORD, arguments), (key, value)
        text = _texts(arguments)[0]
        assert lark_accepts_each(qwen_lltokenizer, grammar, [text])[0] is not lark_refuses, (key, value)
        assert (not llama_cpp_grammar.accepts(grammar.gbnf, text)) is gbnf_refuses, (key, value)
        assert keyword_violation(Tool.from_openai(tool).parameters, arguments)[:2] == (key, keyword)


def test_pydantic_fields_keep_their_constraints(qwen_lltokenizer: Any) -> None:
    from pydantic import BaseModel, Field, constr

    class Booking(BaseModel):
        guests: int = Field(ge=1, le=10)
        code: constr(pattern=r"^[A-Z]{3}$")  # type: ignore[valid-type]
        day: datetime.date

    tool = Tool.from_pydantic(Booking)
    grammar = build_grammar([tool], "required")

    def accepts(arguments: dict[str, Any]) -> bool:
        return lark_accepts_each(qwen_lltokenizer, grammar, [json.dumps([{"name": tool.name, "arguments": arguments}])])[0]

    assert accepts({"guests": 10, "code": "ABC", "day": "2025-01-31"})
    assert not accepts({"guests": 11, "code": "ABC", "day": "2025-01-31"})
    assert not accepts({"guests": 2, "code": "AB", "day": "2025-01-31"})
    assert not accepts({"guests": 2, "code": "ABC", "day": "31/01/2025"})


def test_a_pattern_the_grammar_cannot_express_still_binds_warns_once_and_is_checked_after_decoding(
        qwen_lltokenizer: Any) -> None:
    """A word boundary: RE2 runs it (linear time), the grammar's engines do not have it."""
    tool = Tool(name="boundary", parameters={"type": "object", "properties": {
        "word": {"type": "string", "pattern": r"\bok\b"}}, "required": ["word"]})
    with pytest.warns(SchemaKeywordWarning, match="pattern.*anchor"):
        grammar = build_grammar([tool], "required")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SchemaKeywordWarning)
        build_grammar([tool], "required")  # reported once
    weak = json.dumps([{"name": "boundary", "arguments": {"word": "book"}}])
    assert lark_accepts_each(qwen_lltokenizer, grammar, [weak]) == [True]
    engine = HammerEngine(backend=ScriptedBackend([weak, weak.replace("book", "an ok day")]))
    out = engine.generate([Message.user("set it")], tools=[tool])
    assert out.kind == "invalid" and not out.tool_calls
    assert "'pattern'" in out.invalid_tool_calls[0].reason and out.invalid_tool_calls[0].name == "boundary"
    ok = engine.generate([Message.user("set it to an ok day")], tools=[tool])  # the value given: no ask
    assert ok.kind == "tool_calls" and ok.tool_calls[0].arguments == {"word": "an ok day"}


@pytest.mark.parametrize(("pattern", "feature"), [
    ("^(?=.*[0-9]).{8,}$", "a lookaround"), ("(a)\\1", "a back-reference"), ("x(?<!y)", "a lookaround"),
    ("(?i)abc", "inline flags"), ("(?<year>[0-9]{4})", "cannot read"), ("a{1001}", "repetition"),
])
def test_a_pattern_the_linear_engine_cannot_run_is_refused_when_the_tool_is_bound(pattern: str, feature: str) -> None:
    """Matching it would need a backtracking engine, whose time a crafted pattern makes exponential (issue 37)."""
    schema = {"type": "object", "properties": {"outer": {"type": "object", "properties": {
        "secret": {"type": "string", "pattern": pattern}}}}}
    with pytest.raises(SchemaConversionError) as caught:
        Tool(name="lookahead", parameters=schema)
    assert caught.value.tool == "lookahead" and caught.value.field == "outer.secret.pattern"
    assert feature in str(caught.value) and "Fix: rewrite it" in str(caught.value)
    with pytest.raises(SchemaConversionError, match=re.escape(feature)):
        build_json_grammar(schema, "answer")  # a response format's schema too


def test_the_engine_names_the_keyword_the_grammar_cannot_express() -> None:
    tool = {"name": "pick", "parameters": {"type": "object", "properties": {
        "n": {"type": "integer", "multipleOf": 5}, "ids": {"type": "array", "items": {"type": "integer"},
                                                          "uniqueItems": True}}}}
    answer = '[{"name": "pick", "arguments": {"n": 10, "ids": [1, 2, 1]}}, {"name": "pick", "arguments": {"n": 12}}]'
    engine = HammerEngine(backend=ScriptedBackend([answer]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SchemaKeywordWarning)
        out = engine.generate([Message.user("pick")], tools=[tool])
    assert out.kind == "invalid"
    reasons = [c.reason for c in out.invalid_tool_calls]
    assert "'uniqueItems'" in reasons[0] and "'ids'" in reasons[0]
    assert "'multipleOf'" in reasons[1] and "12 is not a multiple of 5" in reasons[1]


def test_huge_counts_keep_the_grammar_small_and_are_checked_after_decoding() -> None:
    tool = Tool(name="big", parameters={"type": "object", "properties": {
        "text": {"type": "string", "minLength": 10**9, "maxLength": 2 * 10**9},
        "items": {"type": "array", "maxItems": 10**9},
        "n": {"type": "integer", "minimum": -(10**60), "maximum": 10**60}}})
    with pytest.warns(SchemaKeywordWarning):
        grammar = build_grammar([tool], "auto")
    assert len(grammar.gbnf) + len(grammar.lark) < 20_000
    with schema_limits(SchemaLimits(max_min_items=50)), pytest.warns(SchemaKeywordWarning, match="maxLength"):
        small = build_grammar([Tool(name="s", parameters={"type": "object", "properties": {
            "t": {"type": "string", "maxLength": 51}}})], "auto")
    assert "51" not in small.gbnf + small.lark  # left to the check after decoding
    assert keyword_violation(tool.parameters, {"text": "short"})[1] == "minLength"


def test_json_equality_for_unique_items_and_exact_decimals_for_multiple_of() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True},
                                               "x": {"type": "number", "multipleOf": 0.1}}}
    assert keyword_violation(schema, {"a": [1, 1.0]})[1] == "uniqueItems"
    assert keyword_violation(schema, {"a": [1, True, {"k": [1]}, {"k": [2]}]}) is None
    assert keyword_violation(schema, {"x": 0.3}) is None  # 0.3 is a multiple of 0.1 as JSON reads it
    assert keyword_violation(schema, {"x": 0.35})[1] == "multipleOf"


def test_langchain_and_llama_index_get_the_invalid_call() -> None:
    """The check runs in the engine, so both adapters report the call as invalid, naming the keyword."""
    langchain_hammer = require("langchain_hammer", "langchain-hammer")
    llama_hammer = require("llama_index.llms.hammer", "llama-index-llms-hammer")
    spec = {"type": "function", "function": {"name": "pick", "description": "Pick a number.", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "multipleOf": 5}}, "required": ["n"]}}}
    answer = '[{"name": "pick", "arguments": {"n": 12}}]'
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SchemaKeywordWarning)
        chat = langchain_hammer.ChatHammer(backend=ScriptedBackend([answer]))
        message = chat.bind_tools([spec]).invoke("pick")
        assert message.tool_calls == [] and "'multipleOf'" in message.invalid_tool_calls[0]["error"]
        llm = llama_hammer.HammerLLM(backend=ScriptedBackend([answer]))
        response = llm.chat_with_tools([spec], user_msg="pick")
        invalid = response.message.additional_kwargs["invalid_tool_calls"]
        assert response.raw["kind"] == "invalid" and "'multipleOf'" in invalid[0]["reason"]


def test_a_response_formats_warning_does_not_promise_a_check_it_does_not_make() -> None:
    """Tool schemas are checked after decoding; a response format's answer is not: the warning says which."""
    schema = {"type": "object", "properties": {"code": {"type": "string", "pattern": r"\bx+"}}}
    with pytest.warns(SchemaKeywordWarning, match="not checked after decoding") as caught:
        build_json_grammar(schema, "answer-with-boundary")
    assert "invalid call" not in str(caught[0].message)
    with pytest.warns(SchemaKeywordWarning, match="becomes an invalid call"):
        build_grammar([Tool(name="tool_with_boundary", parameters=schema)])
