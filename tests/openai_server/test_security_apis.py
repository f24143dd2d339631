"""The server's hostile-input classes against all three APIs: ``/v1/chat/completions``, ``/v1/responses`` and
``/v1/messages`` (issue 39). The same bodies, written in each API's own shape, must get the same refusal, in
that API's own error JSON, from a real uvicorn on a scripted engine (the refusals happen before the engine,
so no model is needed); hypothesis garbage never gets a 5xx on any of them.

The other classes of test_security*.py (the listener's deadlines and cap, the watchdog, shutdown) sit in
front of every route alike and are tested once there."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.openai_server import BackgroundServer, create_app

KEY = "apis-security-key"
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
PATHS = {"chat": "/chat/completions", "responses": "/responses", "messages": "/messages"}


def nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


def request(api: str, *, tool_schema: dict[str, Any] | None = None, tool_names: tuple[str, ...] = ("get_weather",),
            text: Any = "What's the weather in Paris?", **extra: Any) -> dict[str, Any]:
    """One request in ``api``'s own shape: a user text and tools with ``tool_schema``."""
    schema = tool_schema or CITY
    if api == "chat":
        tools = [{"type": "function", "function": {"name": n, "parameters": schema}} for n in tool_names]
        return {"model": "hammer", "messages": [{"role": "user", "content": text}], "tools": tools, **extra}
    if api == "responses":
        tools = [{"type": "function", "name": n, "parameters": schema} for n in tool_names]
        return {"model": "hammer", "input": [{"role": "user", "content": text}], "tools": tools, **extra}
    tools = [{"name": n, "input_schema": schema} for n in tool_names]
    return {"model": "hammer", "max_tokens": 64, "messages": [{"role": "user", "content": text}], "tools": tools, **extra}


def text_part(api: str, text: Any) -> list[dict[str, Any]]:
    return [{"type": {"chat": "text", "responses": "input_text", "messages": "text"}[api], "text": text}]


def deep_arguments(api: str) -> dict[str, Any]:
    """A history whose earlier call carries arguments nested 900 deep (inside a JSON string where the API has one)."""
    deep = "[" * 900 + "]" * 900
    arguments = json.dumps({"city": json.loads(deep)})
    if api == "chat":
        return {"model": "hammer", "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": CITY}}],
                "messages": [{"role": "user", "content": "hi"},
                             {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
                                 "name": "get_weather", "arguments": arguments}}]},
                             {"role": "tool", "tool_call_id": "c1", "content": "sunny"}]}
    if api == "responses":
        return {"model": "hammer", "tools": [{"type": "function", "name": "get_weather", "parameters": CITY}],
                "input": [{"role": "user", "content": "hi"},
                          {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": arguments},
                          {"type": "function_call_output", "call_id": "c1", "output": "sunny"}]}
    return {"model": "hammer", "max_tokens": 64, "tools": [{"name": "get_weather", "input_schema": CITY}],
            "messages": [{"role": "user", "content": "hi"},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "get_weather",
                                                            "input": json.loads(arguments)}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "sunny"}]}]}


REF_BOMB = {"type": "object", "$defs": {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(40)},
            "properties": {"x": {"$ref": "#/$defs/d0"}}}

# (case, the body for an API, how the refusal is recognised: the OpenAI code, or a word of the message)
CASES: list[tuple[str, Callable[[str], Any], str]] = [
    ("nested over 64 deep", lambda api: request(api, tool_schema=nested(40)), "invalid_json"),
    ("900-deep arguments in the history", deep_arguments, "deep"),
    ("Infinity", lambda api: request(api, temperature=float("inf")), "invalid_json"),
    # A number that overflows to infinity when read (json's float() of 1e999), which no JSON constant names.
    ("1e999", lambda api: json.dumps(request(api, temperature="BIG")).replace('"BIG"', "1e999").encode(), "invalid_json"),
    ("a null text part", lambda api: request(api, text=text_part(api, None)), "text"),
    ("an object as a text part", lambda api: request(api, text=text_part(api, {"a": 1})), "text"),
    ("a backtracking pattern", lambda api: request(api, tool_schema={"type": "object", "properties": {
        "s": {"type": "string", "pattern": "(?=a)(a+)+b"}}}), "invalid_tool_schema"),
    ("look-alike tool names", lambda api: request(api, tool_names=("get_current_time", "get_current_time\u200b")),
     "invalid_tool_schema"),
    ("a look-alike from another script", lambda api: request(api, tool_names=("get_current_time", "g\u0435t_current_time")),
     "invalid_tool_schema"),
    ("a $ref bomb", lambda api: request(api, tool_schema=REF_BOMB), "invalid_tool_schema"),
]


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    engine = HammerEngine(backend=ScriptedBackend(['[{"name": "get_weather", "arguments": {"city": "Paris"}}]'] * 1000))
    with BackgroundServer(create_app(engine, model_name="hammer", api_key=KEY)) as running:
        yield running


def post(server: BackgroundServer, api: str, body: Any, headers: dict[str, str] | None = None) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body, allow_nan=True).encode()
    sent = {"content-type": "application/json", "authorization": f"Bearer {KEY}", **(headers or {})}
    return httpx.post(server.base_url + PATHS[api], content=content, headers=sent, timeout=30, trust_env=False)


def refusal(reply: httpx.Response, api: str) -> tuple[str, str]:
    """(what names the refusal, its message) from ``api``'s own error JSON, which it must be."""
    body = reply.json()
    if api == "messages":
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}, body
        return body["error"]["type"], body["error"]["message"]
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return body["error"]["code"], body["error"]["message"]


@pytest.mark.parametrize("api", list(PATHS))
@pytest.mark.parametrize(("case", "build", "sign"), CASES, ids=[c[0] for c in CASES])
def test_each_hostile_class_is_a_400_on_every_api(server: BackgroundServer, api: str, case: str,
                                                  build: Callable[[str], Any], sign: str) -> None:
    reply = post(server, api, build(api))
    assert reply.status_code == 400, (case, reply.text[:500])
    code, message = refusal(reply, api)
    if api == "messages":
        assert code == "invalid_request_error"
    assert sign in code or sign.replace("_", " ").removeprefix("invalid ") in message.lower(), (case, code, message)
    assert "Traceback" not in reply.text


@pytest.mark.parametrize("api", list(PATHS))
def test_the_front_door_refuses_alike_on_every_api(server: BackgroundServer, api: str) -> None:
    """Key (either header), content type, web origin, DNS rebinding and size: before any body is read."""
    ok = request(api)
    assert post(server, api, ok).status_code == 200
    assert post(server, api, ok, {"authorization": "", "x-api-key": KEY}).status_code == 200  # Anthropic's header
    for headers, status in [({"authorization": ""}, 401), ({"authorization": "Bearer wrong"}, 401),
                            ({"content-type": "text/plain"}, 415), ({"origin": "https://evil.example"}, 403),
                            ({"host": "rebind.evil.example"}, 403)]:
        reply = post(server, api, ok, headers)
        assert reply.status_code == status, (headers, reply.text)
        refusal(reply, api)
    too_large = post(server, api, b"{" + b" " * (9 * 1024 * 1024) + b"}")
    assert too_large.status_code == 413
    refusal(too_large, api)


@settings(max_examples=examples(100), deadline=None, suppress_health_check=list(HealthCheck))
@given(api=st.sampled_from(list(PATHS)), payload=st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["model", "messages", "input", "tools", "content", "role", "type", "text", "max_tokens",
                         "tool_choice", "system", "instructions", "name", "stream"]), inner, max_size=5),
    max_leaves=20))
def test_garbage_never_gets_a_5xx_on_any_api(server: BackgroundServer, api: str, payload: Any) -> None:
    if isinstance(payload, dict):
        payload.setdefault("model", "hammer")
    reply = post(server, api, payload)
    assert reply.status_code < 500, (api, payload, reply.text[:300])
    if reply.status_code >= 400:
        refusal(reply, api)
