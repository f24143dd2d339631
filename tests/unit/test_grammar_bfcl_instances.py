"""Every valid argument a real tool schema allows is accepted: instances generated from BFCL v4's function docs.

The tools are every function of every BFCL v4 single-turn category (the docs ship inside the
installed bfcl-eval: ``bfcl_eval/data/BFCL_v4_*.json``), converted as the benchmark converts them
(:func:`hammer_evals.bfcl.bfcl.to_tool_spec` for the engine, :func:`to_openai_tool` for the JSON
Schema). A seeded generator draws, for each entry's tool set, a call list of valid arguments over
the kinds BFCL uses: strings (ASCII, non-ASCII, non-BMP, quotes, backslashes, slashes, control
characters, empty), integers (snowflake ids of 17 to 25 digits included), numbers (exponents, huge,
tiny), booleans, enums, typed and untyped arrays, objects with and without properties, nested, and
``any``; optional arguments are left out at random, properties come in declaration order (which
the grammar pins). Every instance is checked with ``jsonschema`` first (objects closed, as the
grammar promises), so the generator is trustworthy, then written with ``json.dumps`` in both
spellings (``ensure_ascii`` true and false; every other case indented) and must be accepted by the
grammar's Lark notation through llguidance over the real Qwen2.5 vocabulary; a sample of each
through llama.cpp's own grammar engine on the GBNF notation too. The oracle is not vacuous: broken
calls (a wrong type, an unknown argument name, an unknown tool) must be refused.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import jsonschema
import pytest
from grammar_oracles import LlamaCppGrammar, lark_accepts_each
from installed import require

from hammer_plugins import Tool
from hammer_plugins.grammar.builder import build_grammar
from hammer_plugins.values.errors import SchemaConversionError

bfcl = require("hammer_evals.bfcl.bfcl", "hammer-evals")

SEED = 24
MIN_CASES = 2000
GBNF_EVERY = 10  # one case in ten also through llama.cpp's grammar engine (the GBNF notation)
INVALID_EVERY = 5  # one case in five also broken one way, which must be refused

WORDS = ["Paris", "get", "user_42", "New York", "2024-05-01", "abc", "x", "Hello world", "OK", "AAPL"]
ODD = ["Zürich", "São Paulo", "東京都", "Москва", "naïve café", "😀 party", "🇫🇷", "𝄞 clef", 'say "hi"',
       "C:\\path\\to", "a/b/c", "https://example.com/x?y=1&z=2", "line1\nline2", "tab\there", "bell\x07",
       "\x01ctl", "", " ", "\u2028sep", "mixed Ünïcödé \"q\" \\ /"]
HUGE_INTS = [1306652829778868500, 10**17, -10**18 - 7, 10**25 + 3, 2**63, -(2**64), 10**30]
ODD_FLOATS = [1e-7, 6.02e23, -2.5e-300, 1.7976931348623157e308, 5e-324, 0.1, -0.0, 123456789.123456789, 1e16]


class Unsatisfiable(Exception):
    """No value is valid: an enum none of whose members has the declared type (31 BFCL properties, e.g.
    ``{"type": "boolean", "enum": ["True", "False", "dontcare"]}``; the grammar follows the enum)."""


class Generator:
    """Valid values of a JSON Schema (the kinds BFCL uses), from a seeded ``random.Random``."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def string(self) -> str:
        rng = self.rng
        parts = [rng.choice(ODD if rng.random() < 0.5 else WORDS) for _ in range(rng.randint(1, 3))]
        return rng.choice(["", " ", "-"]).join(parts)

    def integer(self, schema: dict[str, Any]) -> int:
        rng = self.rng
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None or high is not None:
            low = int(low) if low is not None else int(high) - 1000
            high = int(high) if high is not None else low + 1000
            return rng.randint(low, high)
        kind = rng.random()
        if kind < 0.3:
            return rng.choice(HUGE_INTS) * rng.choice([1, -1])
        if kind < 0.4:
            return rng.randint(10**16, 10**24)
        return rng.randint(-1000, 100000)

    def number(self, schema: dict[str, Any]) -> float | int:
        rng = self.rng
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None or high is not None:
            low = float(low) if low is not None else float(high) - 1000
            high = float(high) if high is not None else low + 1000
            return rng.uniform(low, high)
        kind = rng.random()
        if kind < 0.25:
            return rng.choice(ODD_FLOATS) * rng.choice([1, -1])
        if kind < 0.4:
            return self.integer({})
        return round(rng.uniform(-1e4, 1e4), rng.randint(0, 12))

    def any_value(self, depth: int = 2) -> Any:
        rng = self.rng
        kind = rng.choice(["str", "int", "num", "bool", "null"] + (["list", "dict"] if depth else []))
        if kind == "list":
            return [self.any_value(depth - 1) for _ in range(rng.randint(0, 3))]
        if kind == "dict":
            return {self.string(): self.any_value(depth - 1) for _ in range(rng.randint(0, 3))}
        return {"str": self.string, "int": lambda: self.integer({}), "num": lambda: self.number({}),
                "bool": lambda: rng.random() < 0.5, "null": lambda: None}[kind]()

    def value(self, schema: dict[str, Any]) -> Any:
        rng = self.rng
        if "const" in schema:
            return copy.deepcopy(schema["const"])
        if "enum" in schema:
            typed = jsonschema.Draft202012Validator({k: v for k, v in schema.items() if k != "enum"})
            members = [v for v in schema["enum"] if typed.is_valid(v)]
            if not members:
                raise Unsatisfiable(schema)
            return copy.deepcopy(rng.choice(members))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.value(rng.choice(schema[key]))
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = rng.choice(kind)
        if kind == "string" and schema.get("format") == "date":  # BFCL's only format (4 parameters)
            return f"{rng.randint(1900, 2100):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        if kind == "string":
            return self.string()
        if kind == "integer":
            return self.integer(schema)
        if kind == "number":
            return self.number(schema)
        if kind == "boolean":
            return rng.random() < 0.5
        if kind == "null":
            return None
        if kind == "array":
            low = int(schema.get("minItems", 0))
            high = int(schema.get("maxItems", low + 3))
            items = schema.get("items")
            try:
                return [self.value(items) if isinstance(items, dict) and items else self.any_value(1)
                        for _ in range(rng.randint(low, max(low, high)))]
            except Unsatisfiable:
                if low:
                    raise
                return []
        if kind == "object" and schema.get("properties"):
            return self.arguments(schema)
        if kind == "object":  # required names without properties (BFCL has some): any values
            return {**{name: self.any_value(1) for name in schema.get("required", [])},
                    **{self.string(): self.any_value(1) for _ in range(rng.randint(0, 3))}}
        return self.any_value()

    def arguments(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Required properties always, optional ones at random, in declaration order."""
        required = set(schema.get("required", []))
        out = {}
        for name, sub in schema.get("properties", {}).items():
            if name in required or self.rng.random() < 0.6:
                try:
                    out[name] = self.value(sub)
                except Unsatisfiable:
                    if name in required:
                        raise
        return out


def closed(schema: Any) -> Any:
    """The schema as the grammar promises to read it: an object with declared properties takes no others."""
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed(v) if k in ("items", "anyOf", "oneOf", "additionalProperties") else v for k, v in schema.items()
           if (k, v) != ("type", "")}  # one BFCL property has type "": no type, as the engine reads it
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: closed(v) for k, v in schema["properties"].items()}
        out["additionalProperties"] = False
    return out


def bfcl_tool_sets() -> tuple[list[tuple[str, list[Tool], dict[str, Any]]], int]:
    """Every single-turn BFCL v4 entry's tools (engine view) and validators (by name), and how many
    functions were left out because the engine cannot convert them (Java's ``long``, ``HashMap``...)."""
    sets, skipped = [], 0
    for path in sorted(bfcl.data_dir().glob("BFCL_v4_*.json")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if not lines or not lines[0].startswith('{"id"'):  # not JSON Lines of entries (format_sensitivity)
            continue
        for line in lines:
            row = json.loads(line)
            tools, validators = [], {}
            for function in row.get("function") or []:
                try:
                    tool = Tool.from_openai(bfcl.to_tool_spec(function))
                except SchemaConversionError:
                    skipped += 1
                    continue
                if tool.name in validators:
                    continue
                schema = closed(bfcl.to_openai_tool(function)["function"]["parameters"])
                tools.append(tool)
                validators[tool.name] = (schema, jsonschema.Draft202012Validator(schema))
            if tools:
                sets.append((row["id"], tools, validators))
    return sets, skipped


@pytest.fixture(scope="module")
def tool_sets() -> tuple[list[tuple[str, list[Tool], dict[str, Any]]], int]:
    return bfcl_tool_sets()


def valid_calls(gen: Generator, tools: list[Tool], validators: dict[str, Any], count: int,
                unsatisfiable: set[str]) -> list[dict[str, Any]]:
    """``count`` calls to tools of the set with valid arguments (a tool with no valid instance is added
    to ``unsatisfiable`` and never called)."""
    calls: list[dict[str, Any]] = []
    while len(calls) < count:
        usable = [t for t in tools if t.name not in unsatisfiable]
        if not usable:
            break
        tool = gen.rng.choice(usable)
        schema, validator = validators[tool.name]
        try:
            for _attempt in range(50):  # a schema with bounds the generator does not read: draw again
                arguments = gen.arguments(schema)
                if validator.is_valid(arguments):
                    break
            else:
                raise AssertionError(f"no valid instance of {tool.name}: {list(validator.iter_errors(arguments))}")
        except Unsatisfiable:
            unsatisfiable.add(tool.name)
            continue
        calls.append({"name": tool.name, "arguments": arguments})
    return calls


WRONG = [True, "text", 1.5, 7, [1], {"k": 1}, None]


def broken(gen: Generator, tools: list[Tool], validators: dict[str, Any], calls: list[dict[str, Any]]) -> tuple[str, list] | None:
    """The call list broken one way the validator refuses: a wrong type, an unknown argument, an unknown tool."""
    calls = copy.deepcopy(calls)
    call = gen.rng.choice(calls)
    schema, validator = validators[call["name"]]
    kind = gen.rng.choice(["wrong_type", "unknown_argument", "unknown_tool"])
    if kind == "unknown_tool":
        call["name"] += "_x"
        return (kind, calls) if call["name"] not in validators else None
    if kind == "unknown_argument":
        call["arguments"]["not_an_argument"] = 1
        return (kind, calls) if not validator.is_valid(call["arguments"]) else None
    for name in gen.rng.sample(sorted(call["arguments"]), len(call["arguments"])):
        for value in gen.rng.sample(WRONG, len(WRONG)):
            arguments = {**call["arguments"], name: value}
            if not validator.is_valid(arguments):
                call["arguments"] = arguments
                return kind, calls
    return None


def test_every_generated_valid_call_list_is_accepted_in_both_spellings(
        tool_sets: tuple[list[tuple[str, list[Tool], dict[str, Any]]], int], qwen_lltokenizer: Any,
        default_model_path: str) -> None:
    sets, skipped = tool_sets
    assert len(sets) > MIN_CASES and skipped < 50, (len(sets), skipped)
    gen = Generator(SEED)
    llama_cpp = LlamaCppGrammar(default_model_path)
    rejected: list[tuple[str, str]] = []
    wrongly_accepted: list[tuple[str, str, str]] = []
    texts_checked = invalid_checked = gbnf_checked = 0
    unsatisfiable: set[str] = set()
    for index, (entry_id, tools, validators) in enumerate(sets):
        calls = valid_calls(gen, tools, validators, gen.rng.randint(1, 3), unsatisfiable)
        if not calls:
            continue
        indent = 2 if index % 2 else None
        texts = [json.dumps(calls, ensure_ascii=ascii_only, indent=indent) for ascii_only in (False, True)]
        bad = broken(gen, tools, validators, calls) if index % INVALID_EVERY == 0 else None
        if bad is not None:
            texts.append(json.dumps(bad[1], ensure_ascii=bool(index % 2)))
        grammar = build_grammar(tools)
        verdicts = lark_accepts_each(qwen_lltokenizer, grammar, texts)
        if index % GBNF_EVERY == 0:
            verdicts = [v and llama_cpp.accepts(grammar.gbnf, t) if i < 2 else v or llama_cpp.accepts(grammar.gbnf, t)
                        for i, (v, t) in enumerate(zip(verdicts, texts, strict=True))]
            gbnf_checked += len(texts)
        rejected += [(entry_id, t) for t, ok in zip(texts[:2], verdicts[:2], strict=True) if not ok]
        texts_checked += 2
        if bad is not None:
            invalid_checked += 1
            if verdicts[2]:
                wrongly_accepted.append((entry_id, bad[0], texts[2]))
    assert texts_checked >= 2 * MIN_CASES and invalid_checked >= 500 and gbnf_checked >= 600
    assert len(unsatisfiable) <= 3, unsatisfiable  # get_response (two versions) and Events_3_BuyEventTickets
    assert rejected == [], f"{len(rejected)} of {texts_checked} valid texts rejected, e.g. {rejected[:3]}"
    assert wrongly_accepted == [], f"{len(wrongly_accepted)} of {invalid_checked} broken texts accepted: {wrongly_accepted[:3]}"


def test_the_generator_is_checked_by_the_validator() -> None:
    """The validator the test trusts refuses what the issue's user saw refused for other reasons, and the
    generator's output on a schema with every kind validates."""
    schema = closed({"type": "object", "properties": {
        "id": {"type": "integer"}, "x": {"type": "number"}, "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"]},
        "any": {}, "unit": {"type": "string", "enum": ["°C", "°F"]}}, "required": ["id"]})
    validator = jsonschema.Draft202012Validator(schema)
    gen = Generator(0)
    assert all(validator.is_valid(gen.arguments(schema)) for _ in range(500))
    assert not validator.is_valid({"id": 1, "extra": 2}) and not validator.is_valid({"id": "1"})
