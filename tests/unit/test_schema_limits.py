"""Budgets before work (issue 29): hostile or broken schemas are refused quickly, with bounded memory,
as a SchemaConversionError naming what is wrong, never a 500-worthy AttributeError, OverflowError,
RecursionError or a frozen process. Classes of input, generated, not a list of cases.

Every case runs through :class:`HammerEngine` (the path ChatHammer, HammerLLM, the CLI and the server
share) on the scripted backend.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from hammer_plugins import HammerEngine, Message, ScriptedBackend, Tool
from hammer_plugins.backends.base import GenerationChunk, GenerationSettings, Usage
from hammer_plugins.grammar.builder import Grammar
from hammer_plugins.support.sized_cache import SizedCache
from hammer_plugins.tools.limits import Budget, SchemaLimits, limits_from_env, schema_limits
from hammer_plugins.values.errors import ContextWindowExceededError, SchemaConversionError, SchemaLimitError

# The work before a refusal, counted in the budget's own steps (a schema object inlined, a value
# sized): independent of the machine's speed, unlike a clock. A refusal comes after at most about
# max_schema_nodes objects, whatever fan_out**depth the schema would grow to.
MAX_STEPS = 3 * SchemaLimits().max_schema_nodes
# A backstop against work the budget does not count: generous, as CI machines are slow and loaded
# (1.1 s of CPU was measured there for a refusal that takes 0.3 s here), yet far below what an
# unbounded expansion takes (depth 20 ran past 20 s before the budget existed).
BACKSTOP_SECONDS = 10.0
MEMORY_BYTES = 64 * 2**20
HYPO = settings(max_examples=examples(8), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def refused(parameters: Any, *, response_format: bool = False, memory: bool = False) -> SchemaConversionError:
    """Send ``parameters`` as a tool's (or as a response_format schema) through the engine: it must be
    refused with a SchemaConversionError within MAX_STEPS of the budget's steps (and BACKSTOP_SECONDS
    of CPU time), and with ``memory`` within MEMORY_BYTES of Python allocations."""
    engine = HammerEngine(backend=ScriptedBackend(["[]", "{}"]))
    kwargs: dict[str, Any] = ({"response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": parameters}}}
                              if response_format else
                              {"tools": [{"type": "function", "function": {"name": "f", "parameters": parameters}}]})
    started = time.thread_time()
    with mock.patch.object(Budget, "tick", autospec=True, side_effect=Budget.tick) as steps, \
            pytest.raises(SchemaConversionError) as caught:
        engine.generate([Message.user("hi")], **kwargs)
    elapsed = time.thread_time() - started
    assert steps.call_count <= MAX_STEPS, f"{steps.call_count} steps before the refusal: {caught.value}"
    assert elapsed < BACKSTOP_SECONDS, f"took {elapsed:.2f}s of CPU: {caught.value}"
    assert "Fix:" in str(caught.value)
    if not memory:
        return caught.value
    tracemalloc.start()  # again, for its memory (tracing makes it several times slower)
    try:
        with pytest.raises(SchemaConversionError):
            engine.generate([Message.user("hi")], **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MEMORY_BYTES, f"peak {peak / 2**20:.0f} MiB"
    return caught.value


# ------------------------------------------------------------------ generators of hostile schemas
def ref_bomb(depth: int, fan_out: int, leaf: dict[str, Any] | None = None) -> dict[str, Any]:
    """Each definition refers ``fan_out`` times to the next: fan_out**depth schema objects once inlined."""
    defs = {f"D{i}": {"type": "object", "properties": {f"p{k}": {"$ref": f"#/$defs/D{i + 1}"} for k in range(fan_out)}}
            for i in range(depth)}
    defs[f"D{depth}"] = leaf or {"type": "string", "description": "leaf"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs}


def ref_bomb_in_items(depth: int, fan_out: int) -> dict[str, Any]:
    """The same through arrays and anyOf instead of properties."""
    defs = {f"D{i}": {"anyOf": [{"type": "array", "items": {"$ref": f"#/$defs/D{i + 1}"}} for _ in range(fan_out)]}
            for i in range(depth)}
    defs[f"D{depth}"] = {"type": "integer"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs}


WRAPPERS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "properties": lambda s: {"type": "object", "properties": {"a": s}},
    "items": lambda s: {"type": "array", "items": s},
    "anyOf": lambda s: {"anyOf": [s, {"type": "integer"}]},
    "additionalProperties": lambda s: {"type": "object", "additionalProperties": s},
    "allOf": lambda s: {"allOf": [s]},
}


def nested(kinds: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for kind in kinds:
        schema = WRAPPERS[kind](schema)
    return {"type": "object", "properties": {"deep": schema}}


@HYPO
@given(depth=st.integers(12, 40), fan_out=st.integers(2, 4), where=st.sampled_from(["properties", "items"]))
def test_exponential_refs_are_refused_quickly_with_bounded_memory(depth: int, fan_out: int, where: str) -> None:
    if fan_out ** depth <= SchemaLimits().max_schema_nodes:  # pragma: no cover - the strategy's range is above it
        return
    schema = ref_bomb(depth, fan_out) if where == "properties" else ref_bomb_in_items(depth, fan_out)
    error = refused(schema)
    assert isinstance(error, SchemaLimitError) and error.limit in ("max_schema_nodes", "max_depth")


@HYPO
@given(depth=st.integers(12, 30), fan_out=st.integers(2, 3))
def test_exponential_refs_through_response_format_are_refused(depth: int, fan_out: int) -> None:
    assert isinstance(refused(ref_bomb(depth, fan_out), response_format=True), SchemaLimitError)


@HYPO
@given(kinds=st.lists(st.sampled_from(sorted(WRAPPERS)), min_size=70, max_size=3000))
def test_deep_nesting_of_any_kind_is_refused(kinds: list[str]) -> None:
    if sum(2 if k in ("properties", "anyOf") else 0 if k == "allOf" else 1 for k in kinds) <= SchemaLimits().max_depth:
        return
    error = refused(nested(kinds))
    assert isinstance(error, SchemaLimitError) and error.limit == "max_depth"


@HYPO
@given(depth=st.integers(70, 5000), where=st.sampled_from(["default", "const", "enum", "examples", "x-extra"]))
def test_deep_values_inside_a_schema_are_refused(depth: int, where: str) -> None:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    prop = {"type": "array", where: [value] if where == "enum" else value}
    assert isinstance(refused({"type": "object", "properties": {"a": prop}}), SchemaLimitError)


@HYPO
@given(count=st.integers(10_001, 200_000), size=st.integers(1, 8))
def test_enums_with_too_many_members_are_refused(count: int, size: int) -> None:
    members = ["x" * size + str(i) for i in range(count)]
    error = refused({"type": "object", "properties": {"e": {"type": "string", "enum": members}}})
    assert isinstance(error, SchemaLimitError) and error.limit in ("max_enum_values", "max_enum_bytes")


@HYPO
@given(member=st.integers(100_001, 8 << 20), members=st.integers(1, 3))
def test_enums_with_too_much_text_are_refused(member: int, members: int) -> None:
    error = refused({"type": "object", "properties": {"e": {"enum": ["y" * member + str(i) for i in range(members)]}}})
    assert isinstance(error, SchemaLimitError) and error.limit in ("max_enum_bytes", "max_schema_bytes")


@pytest.mark.parametrize("schema", [
    ref_bomb(40, 2), ref_bomb_in_items(30, 3), nested(["properties", "items"] * 2000),
    {"type": "object", "properties": {"e": {"enum": [f"v{i}" for i in range(1_000_000)]}}},
    {"type": "object", "properties": {"e": {"enum": ["z" * (8 << 20)]}}},
], ids=["refs", "refs-in-items", "deep", "enum-count", "enum-8MiB"])
def test_each_class_is_refused_with_bounded_memory(schema: dict[str, Any]) -> None:
    refused(schema, memory=True)


def test_an_enum_repeated_through_refs_counts_every_time() -> None:
    leaf = {"type": "string", "enum": [f"member-{i:04d}" for i in range(2000)]}  # 28 kB: fine alone
    Tool(name="ok", parameters={"type": "object", "properties": {"e": leaf}})
    assert isinstance(refused(ref_bomb(3, 2, leaf)), SchemaLimitError)  # 8 copies: over max_enum_bytes


BAD_NUMBERS = [math.inf, -math.inf, math.nan, -1, 1.5, -0.5, 2**31, 10**400, "3", True, None, [1], {"a": 1}]
COUNT_KEYS = ["minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"]
BOUND_KEYS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"]


@HYPO
@given(key=st.sampled_from(COUNT_KEYS), value=st.sampled_from(BAD_NUMBERS), response_format=st.booleans())
def test_bad_counts_are_clear_errors(key: str, value: Any, response_format: bool) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array", key: value}}}
    assert key in str(refused(schema, response_format=response_format))


@HYPO
@given(key=st.sampled_from(BOUND_KEYS), value=st.sampled_from([math.inf, -math.inf, math.nan, "3", None, [1]]))
def test_bad_bounds_are_clear_errors(key: str, value: Any) -> None:
    assert key in str(refused({"type": "object", "properties": {"a": {"type": "number", key: value}}}))


def test_min_items_from_json_1e309_is_a_clear_error() -> None:
    """The issue's case: JSON's 1e309 parses to inf (int() of it was an OverflowError, a 500)."""
    schema = json.loads('{"type": "object", "properties": {"a": {"type": "array", "minItems": 1e309}}}')
    assert "minItems" in str(refused(schema))


def test_min_items_over_what_a_grammar_can_unroll_is_refused() -> None:
    error = refused({"type": "object", "properties": {"a": {"type": "array", "minItems": 1_000_000}}})
    assert isinstance(error, SchemaLimitError) and error.limit == "max_min_items"


def test_good_numbers_stay_as_written() -> None:
    tool = Tool(name="f", parameters={"type": "object", "properties": {
        "a": {"type": "array", "minItems": 2, "maxItems": 5.0}, "n": {"type": "number", "minimum": -1.5,
                                                                       "exclusiveMaximum": True, "multipleOf": 0.5}}})
    assert tool.properties["a"]["maxItems"] == 5.0 and tool.properties["n"]["minimum"] == -1.5


MALFORMED = [
    {"$ref": 5}, {"$ref": None}, {"$ref": ["#/$defs/A"]}, {"$ref": "#/$defs/Missing"}, {"$ref": "http://x/y"},
    {"allOf": {"type": "string"}}, {"allOf": []}, {"anyOf": 5}, {"oneOf": "x"}, {"anyOf": [5]}, {"items": 5},
    {"items": [{"type": "string"}]}, {"properties": [1, 2]}, {"type": "object", "properties": {"x": 5}},
    {"type": "object", "properties": {"x": {}}, "required": "x"}, {"type": "object", "properties": {}, "required": [1]},
    {"enum": []}, {"enum": "abc"}, {"type": {"a": 1}}, {"type": [5]}, {"type": "complex"}, 5, "string", [1], None,
    False,
]


@pytest.mark.parametrize("shape", MALFORMED, ids=repr)
@pytest.mark.parametrize("response_format", [False, True])
def test_malformed_shapes_are_schema_errors(shape: Any, response_format: bool) -> None:
    refused({"type": "object", "properties": {"a": shape}}, response_format=response_format)


def test_malformed_top_levels_are_schema_errors() -> None:
    for parameters in ({"$defs": [1], "type": "object"}, {"definitions": "x", "type": "object"},
                       {"type": "object", "properties": {}, "required": 7}, [1, 2], 7, "x"):
        refused(parameters)
    for schema in ({"$defs": [1], "type": "array"}, [1, 2], 7, "x"):
        refused(schema, response_format=True)


# Any JSON value, and schema-shaped dicts whose keyword values are any JSON value.
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                    max_leaves=20)
KEYWORDS = ["type", "properties", "items", "anyOf", "oneOf", "allOf", "enum", "const", "$ref", "$defs", "required",
            "additionalProperties", "minItems", "maxLength", "minimum", "default", "description", "nullable"]
SCHEMAISH = st.recursive(
    st.dictionaries(st.sampled_from(KEYWORDS), JSON, max_size=4),
    lambda inner: st.dictionaries(st.sampled_from(KEYWORDS), inner | JSON | st.lists(inner, max_size=3)
                                  | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_size=5),
    max_leaves=15)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=SCHEMAISH, response_format=st.booleans())
def test_any_schema_shaped_input_is_an_answer_or_a_schema_error(schema: dict[str, Any], response_format: bool) -> None:
    """Whatever the shape, the engine answers or raises SchemaConversionError: nothing else escapes."""
    engine = HammerEngine(backend=ScriptedBackend(responder=lambda prompt: "[]"))
    params = {"type": "object", "properties": {"a": schema}}
    kwargs: dict[str, Any] = ({"response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}}
                              if response_format else {"tools": [{"name": "f", "parameters": params}]})
    try:
        engine.generate([Message.user("hi")], **kwargs)
    except SchemaConversionError:
        pass


def test_limits_are_configurable_per_engine_and_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    big = ref_bomb(13, 2)  # 16k schema objects once inlined
    engine = HammerEngine(backend=ScriptedBackend(["[]"]))
    with pytest.raises(SchemaLimitError):
        engine.bind([{"name": "f", "parameters": big}])
    engine.schema_limits = SchemaLimits(max_schema_nodes=100_000, max_schema_bytes=20_000_000, max_build_seconds=120)
    assert engine.bind([{"name": "f", "parameters": big}]).tools[0].name == "f"
    strict = HammerEngine(backend=ScriptedBackend([]))
    strict.schema_limits = SchemaLimits(max_depth=3)
    with pytest.raises(SchemaLimitError, match="HAMMER_LIMIT_MAX_DEPTH"):
        strict.bind([{"name": "g", "parameters": nested(["properties"])}])
    with schema_limits(SchemaLimits(max_enum_values=2)), pytest.raises(SchemaLimitError):
        Tool(name="h", parameters={"type": "object", "properties": {"e": {"enum": [1, 2, 3]}}})
    assert limits_from_env({"HAMMER_LIMIT_MAX_SCHEMA_NODES": "50_000", "HAMMER_LIMIT_MAX_BUILD_SECONDS": "2.5"}) == \
        SchemaLimits(max_schema_nodes=50_000, max_build_seconds=2.5)
    with pytest.raises(ValueError, match="HAMMER_LIMIT_MAX_DEPTH"):
        limits_from_env({"HAMMER_LIMIT_MAX_DEPTH": "deep"})
    with pytest.raises(ValueError):
        SchemaLimits(max_depth=0)


def test_a_grammar_over_its_size_limit_is_refused() -> None:
    engine = HammerEngine(backend=ScriptedBackend(["[]"]), tool_budget=0)  # every tool offered: the whole grammar
    engine.schema_limits = SchemaLimits(max_grammar_bytes=20_000)
    tools = [{"name": f"t{i}", "parameters": {"type": "object", "properties": {f"p{j}": {"type": "string"} for j in range(20)}}}
             for i in range(20)]
    with pytest.raises(SchemaLimitError, match="max_grammar_bytes"):
        engine.generate([Message.user("hi")], tools=tools)


def test_objects_with_thousands_of_properties_build_without_recursion() -> None:
    props = {f"p{i}": {"type": "integer"} for i in range(3000)}
    engine = HammerEngine(backend=ScriptedBackend([]))
    binding = engine.bind([{"name": "wide", "parameters": {"type": "object", "properties": props, "required": ["p7"]}}])
    assert "p2999" in binding.grammar("auto", True).lark


# ------------------------------------------------------------------ caches bounded by size
def test_sized_cache_is_bounded_by_size_and_entries() -> None:
    cache: SizedCache[int, str] = SizedCache(max_entries=100, max_size=1000)
    for i in range(50):
        cache.put(i, "x" * 300, 300)
        assert cache.size <= 1000 and len(cache) <= 100
    assert cache.get(49) is not None and cache.get(0) is None
    cache.put("huge", "x", 5000)  # larger than the whole bound: not kept
    assert cache.get("huge") is None and cache.size <= 1000


def test_the_grammar_cache_stays_under_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    from hammer_plugins.engine import binding as binding_module

    small = SizedCache(1000, 200_000)
    monkeypatch.setattr(binding_module, "_GRAMMARS", small)
    engine = HammerEngine(backend=ScriptedBackend([]))
    for i in range(40):  # distinct tool sets, each grammar some 20 kB
        tools = [{"name": f"set{i}_t{k}", "parameters": {"type": "object", "properties": {
            f"p{j}": {"type": "string", "enum": [f"v{i}-{j}-{n}" for n in range(5)]} for j in range(8)}}} for k in range(3)]
        engine.bind(tools).grammar("auto", True)
        assert small.size <= 200_000
    assert 0 < len(small) < 40


# ------------------------------------------------------------------ context window first, max_tokens capped
def test_a_prompt_over_the_window_is_refused_before_any_grammar_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    from hammer_plugins.engine import binding, planning

    def no_grammar(*args: Any, **kwargs: Any) -> Grammar:
        raise AssertionError("the grammar was built for a prompt that cannot fit")

    monkeypatch.setattr(binding, "build_grammar", no_grammar)
    monkeypatch.setattr(planning, "build_json_grammar", no_grammar)
    engine = HammerEngine(backend=ScriptedBackend(["[]"], context_window=256))
    tool = {"name": "brand_new_tool", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}}
    with pytest.raises(ContextWindowExceededError):
        engine.generate([Message.user("word " * 2000)], tools=[tool])
    with pytest.raises(ContextWindowExceededError):
        engine.generate([Message.user("word " * 2000)], response_format={"type": "json_object"})


@pytest.mark.parametrize("tools", [False, True])
def test_max_tokens_beyond_the_window_is_reduced_not_refused(tools: bool) -> None:
    backend = ScriptedBackend(["[]", "plain answer"], context_window=2048)
    engine = HammerEngine(backend=backend, on_refusal="answer")
    kwargs: dict[str, Any] = {"tools": [{"name": "f", "parameters": {}}]} if tools else {}
    engine.generate([Message.user("hi")], max_tokens=10**9, **kwargs)
    for used, prompt in zip(backend.settings, backend.prompts, strict=True):
        assert used.max_tokens <= 2048 - backend.count_tokens(prompt)


# ------------------------------------------------------------------ planning off the event loop
class NativeScripted(ScriptedBackend):
    """A native-async scripted backend (as the server backend is): astream runs on the loop."""

    native_async = True

    async def aload(self) -> None:
        return None

    async def acount_tokens(self, text: str) -> int:
        return self.count_tokens(text)

    async def astream(self, prompt: str, settings: GenerationSettings,  # type: ignore[override]
                      grammar: Grammar | None = None) -> AsyncIterator[GenerationChunk]:
        self.prompts.append(prompt)
        yield GenerationChunk(text="[]")
        yield GenerationChunk(text="", finish_reason="stop", usage=Usage(prompt_tokens=1, completion_tokens=1))


def big_tool_set(n: int, tag: str) -> list[dict[str, Any]]:
    """Within the default budgets, yet a second or so of conversion and grammar building."""
    return [{"name": f"{tag}_tool_{i}", "description": "does a thing " * 5, "parameters": {"type": "object", "properties": {
        f"p{j}": {"type": "string", "description": f"parameter {j} of {tag} {i}"}
        for j in range(25)}}} for i in range(n)]


def test_astream_plans_in_a_worker_thread_so_other_coroutines_keep_running(loop_ticker: Any) -> None:
    # Every tool offered (tool_budget=0): the whole set is converted and its grammar built, a long planning.
    engine = HammerEngine(backend=NativeScripted(context_window=200_000), max_tokens=16, tool_budget=0)
    engine.backend.context_window  # noqa: B018 - created now, outside the timed part
    tools = big_tool_set(80, "ticks")

    async def main() -> tuple[float, int]:
        async with loop_ticker(0.005) as ticker:
            started = time.perf_counter()
            async for _ in engine.astream([Message.user("hi")], tools=tools):
                pass
            return time.perf_counter() - started, ticker.ticks

    elapsed, ticks = asyncio.run(main())
    assert elapsed > 0.05  # the planning took a while ...
    # ... and the loop kept turning meanwhile: a loop blocked by the planning does not tick at all (0 in
    # the same test with the planning on the loop); the worker holds the GIL in turns and the machine may
    # be busy, so only a few ticks are asked.
    assert ticks >= 5, (ticks, elapsed)


def test_hammer_style_required_flags_stay_accepted() -> None:
    """Hammer's own tool format marks a parameter ``"required": true``: a flag, not a malformed list."""
    engine = HammerEngine(backend=ScriptedBackend(["[]"]))
    tool = {"name": "f", "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "required": True},
        "where": {"type": "object", "required": True, "properties": {"a": {"type": "string"}}}}}}
    assert engine.generate([Message.user("hi")], tools=[tool]).kind == "refusal"
