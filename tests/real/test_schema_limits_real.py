"""The schema budgets on the real default model (llama.cpp): a hostile schema is refused before the
model does any work, sync and async, and the engine answers normally right after."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from hammer_plugins import HammerEngine, Message
from hammer_plugins.values.errors import SchemaConversionError, SchemaLimitError

pytestmark = pytest.mark.real_model


def ref_bomb(depth: int) -> dict:
    defs = {f"D{i}": {"type": "object", "properties": {"a": {"$ref": f"#/$defs/D{i + 1}"},
                                                      "b": {"$ref": f"#/$defs/D{i + 1}"}}} for i in range(depth)}
    defs[f"D{depth}"] = {"type": "string"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": defs}


def test_hostile_schemas_are_refused_on_the_real_model(llama_engine: HammerEngine) -> None:
    hostile = [ref_bomb(20), json.loads('{"type": "object", "properties": {"a": {"type": "array", "minItems": 1e309}}}'),
               {"type": "object", "properties": {"a": {"$ref": 5}}}]
    for parameters in hostile:
        started = time.thread_time()
        with pytest.raises(SchemaConversionError):
            llama_engine.generate([Message.user("hi")], tools=[{"name": "f", "parameters": parameters}])
        assert time.thread_time() - started < 1.0
    with pytest.raises(SchemaLimitError):
        llama_engine.generate([Message.user("a joke")], response_format={
            "type": "json_schema", "json_schema": {"name": "r", "schema": ref_bomb(20)}})

    async def refused_async() -> None:
        with pytest.raises(SchemaLimitError):
            async for _ in llama_engine.astream([Message.user("hi")], tools=[{"name": "f", "parameters": ref_bomb(20)}]):
                pass

    asyncio.run(refused_async())
    # The engine is unharmed: a normal call right after works.
    reply = llama_engine.generate([Message.user("What's the weather in Paris?")], tools=[{
        "name": "get_weather", "description": "Current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}])
    assert reply.kind == "tool_calls" and reply.tool_calls[0].name == "get_weather"
