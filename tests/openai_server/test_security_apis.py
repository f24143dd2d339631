"""The server's hostile-input classes against all four APIs: ``/v1/chat/completions``, ``/v1/responses``,
``/v1/messages`` and Ollama's ``/api/chat``. The same bodies, written in each API's own shape, must get the same refusal, in
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
from hammer_plugins.http_api import BackgroundServer, create_app

KEY = "apis-security-key"
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages", "ollama": "/api/chat"}


def nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


def request(api: str, *, tool_schema: dict[str, Any] | None = None, tool_names: tuple[str, ...] = ("get_weather",),
            text: Any = "What's the weather in Paris?", **extra: Any) -> dict[str, Any]:
    """One request in ``api``'s own shape: a user text and tools with ``tool_schema``."""
    schema = tool_schema or CITY
    if api in ("chat", "ollama"):
        tools = [{"type": "function", "function": {"name": n, "parameters": schema}} for n in tool_names]
        return {"model": "hammer", "messages": [{"role": "user", "content": text}], "tools": tools,
                **({"stream": False} if api == "ollama" else {}), **extra}
    if api == "responses":
        tools = [{"type": "function", "name": n, "parameters": schema} for n in tool_names]
        return {"model": "hammer", "input": [{"role": "user", "content": text}], "tools": tools, **extra}
    tools = [{"name": n, "input_schema": schema} for n in tool_names]
    return {"model": "hammer", "max_tokens": 64, "messages": [{"role": "user", "content": text}], "tools": tools, **extra}


def text_part(api: str, text: Any) -> list[dict[str, Any]]:
    return [{"type": {"chat": "text", "responses": "input_text", "messages": "text", "ollama": "text"}[api],
             "text": text}]


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
    if api == "ollama":  # arguments as an object, the result named by its tool
        return {"model": "hammer", "stream": False,
                "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": CITY}}],
                "messages": [{"role": "user", "content": "hi"},
                             {"role": "assistant", "tool_calls": [{"function": {
                                 "name": "get_weather", "arguments": json.loads(arguments)}}]},
                             {"role": "tool", "tool_name": "get_weather", "content": "sunny"}]}
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
    return httpx.post(server.url + PATHS[api], content=content, headers=sent, timeout=30, trust_env=False)


def refusal(reply: httpx.Response, api: str) -> tuple[str, str]:
    """(what names the refusal, its message) from ``api``'s own error JSON, which it must be."""
    body = reply.json()
    if api == "ollama":
        assert set(body) == {"error"} and isinstance(body["error"], str), body
        return body["error"], body["error"]
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
    if api == "ollama":  # Ollama reads any body as JSON (its docs' curl -d): from no browser, so does this door
        assert post(server, api, ok, {"content-type": "application/x-www-form-urlencoded"}).status_code == 200
    for headers, status in [({"authorization": ""}, 401), ({"authorization": "Bearer wrong"}, 401),
                            ({"content-type": "text/plain", "origin": "http://localhost:3000"}, 415),
                            ({"content-type": "text/plain"}, 200 if api == "ollama" else 415),
                            ({"origin": "https://evil.example"}, 403),
                            ({"host": "rebind.evil.example"}, 403)]:
        reply = post(server, api, ok, headers)
        assert reply.status_code == status, (headers, reply.text)
        if status != 200:
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


# ------------------------------------------------------------------ each API in its own words (issue 46), unforeseen
# bodies (issue 47, class 5) and quadratic walks (class 1)
def _parsers() -> dict[str, Callable[[Any], Any]]:
    from hammer_plugins.http_api.chat_completions.request import read_chat
    from hammer_plugins.http_api.messages.request import read_messages
    from hammer_plugins.http_api.ollama.request import OllamaChatRequest, read_ollama
    from hammer_plugins.http_api.responses.request import read_responses

    return {"ollama": lambda body: read_ollama(body, "hammer", OllamaChatRequest)[1],
            "chat": lambda body: read_chat(body, ["hammer"])[1],
            "responses": lambda body: read_responses(body, ["hammer"])[1],
            "messages": lambda body: read_messages(body, ["hammer"])[1]}


def _refused(api: str, body: dict[str, Any]) -> Any:
    from hammer_plugins.http_api.errors import APIError

    with pytest.raises(APIError) as caught:
        _parsers()[api](body)
    return caught.value


@pytest.mark.parametrize(("api", "change", "param"), [
    ("responses", {"max_output_tokens": 0}, "max_output_tokens"),
    ("responses", {"input": [{"type": "function_call_output", "call_id": "c9", "output": "x"}]}, "input[0].call_id"),
    ("responses", {"input": [{"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{"}]},
     "input[0].arguments"),
    ("responses", {"tool_choice": {"type": "allowed_tools", "tools": 5}}, "tool_choice.tools"),
    ("responses", {"input": [{"type": ["x"]}]}, "input[0].type"),
    ("responses", {"text_field": {"format": "x"}}, "text.format"),
    ("responses", {"stop": ["s"] * 17}, "stop"),
    ("messages", {"stop_sequences": ["s"] * 17}, "stop_sequences"),
    ("messages", {"temperature": 1.5}, "temperature"),
    ("messages", {"max_tokens": True}, "max_tokens"),
    ("messages", {"tool_choice": {"type": "tool", "name": ["f"]}}, "tool_choice.name"),
    ("messages", {"messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t9", "content": "x"}]}]}, "messages[1].content[0].tool_use_id"),
    ("chat", {"stop": ["s"] * 17}, "stop"),
    ("chat", {"stop": "s" * 5000}, "stop"),
])
def test_each_api_names_its_own_field(api: str, change: dict[str, Any], param: str) -> None:
    """A Responses or Messages request is read as that API, not rewritten into a Chat body first: its errors
    name its own fields (the rewrite named max_tokens for max_output_tokens and messages[2] for input[5]), and
    the bodies issue 47 found raising TypeError past the parser are 400s like any other."""
    body = request(api, **{k: v for k, v in change.items() if k != "text_field"})
    if "text_field" in change:
        body["text"] = change["text_field"]
    error = _refused(api, body)
    assert (error.status, error.param) == (400, param), error.message
    assert error.code != "invalid_request", error.message  # a foreseen case, not the catch-all


def test_stop_lists_are_bounded_on_every_api() -> None:
    from hammer_plugins.http_api.request_checks import MAX_STOP_CHARACTERS, MAX_STOP_SEQUENCES

    for api, field in (("chat", "stop"), ("responses", "stop"), ("messages", "stop_sequences")):
        call = _parsers()[api](request(api, **{field: ["s"] * MAX_STOP_SEQUENCES}))
        assert call.sampling()["stop"] == ["s"] * MAX_STOP_SEQUENCES
        _refused(api, request(api, **{field: ["s"] * (MAX_STOP_SEQUENCES + 1)}))
        _refused(api, request(api, **{field: ["s" * (MAX_STOP_CHARACTERS // 2 + 1)] * 2}))


_KEYS = ["model", "messages", "input", "tools", "tool_choice", "content", "role", "type", "text", "format", "name",
         "namespace", "call_id", "tool_use_id", "arguments", "output", "input_schema", "parameters", "function", "mode",
         "max_tokens", "max_output_tokens", "stop", "stop_sequences", "system", "instructions", "stream", "id",
         "tool_name", "tool_call_id", "tool_calls", "options", "num_predict", "images"]


@settings(max_examples=examples(300), deadline=None, suppress_health_check=list(HealthCheck))
@given(api=st.sampled_from(["chat", "responses", "messages", "ollama"]), payload=st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
    | st.sampled_from(["function", "function_call", "function_call_output", "message", "tool", "tool_use",
                       "tool_result", "allowed_tools", "namespace", "json_schema", "user", "assistant", "hammer"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=6),
    max_leaves=30))
def test_the_parsers_foresee_every_body(api: str, payload: Any) -> None:
    """Every parser answers any body with a call or an API error it meant to give: the catch-all (a 400 with
    one log line) never has to step in. The bodies are built from the APIs' own keys and values."""
    from hammer_plugins.http_api.errors import APIError

    if isinstance(payload, dict):
        payload.setdefault("model", "hammer")
    try:
        _parsers()[api](payload)
    except APIError as exc:
        assert exc.code != "invalid_request", (api, payload, exc.message)


@pytest.mark.parametrize("api", ["responses", "messages", "chat", "ollama"])
def test_parsing_grows_linearly_with_the_body(api: str) -> None:
    """40k outputs of one call and 20k tools parse in time linear in their number (issue 47: a scan back over
    the history per output, and names.count per tool, were quadratic and ran before admission)."""
    import time

    def body(n: int) -> dict[str, Any]:
        names = [f"tool_{i}" for i in range(n)]
        base = request(api, tool_names=tuple(names), tool_schema={"type": "object", "properties": {}})
        if api == "responses":
            base["input"] = [{"role": "user", "content": "hi"},
                             {"type": "function_call", "call_id": "c1", "name": "tool_0", "arguments": "{}"},
                             *({"type": "function_call_output", "call_id": "c1", "output": "x"} for _ in range(n))]
        elif api == "messages":
            base["messages"] = [{"role": "user", "content": "hi"},
                                {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "tool_0",
                                                                   "input": {}}]},
                                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "x"}
                                                             for _ in range(n)]}]
        elif api == "ollama":  # results found by name past half the calls: a walk per result would be quadratic
            calls = [{"function": {"name": f"tool_{i * 2 // n}", "arguments": {}}} for i in range(n)]
            base["messages"] = [{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": calls},
                                *({"role": "tool", "tool_name": "tool_1", "content": "x"} for _ in range(n // 2))]
        return base

    def seconds(n: int) -> float:
        import gc

        payload = body(n)
        gc.disable()
        try:
            started = time.perf_counter()
            try:
                _parsers()[api](payload)
            except Exception:  # noqa: BLE001 - a refusal (a budget) is fine: only the time is measured
                pass
            return time.perf_counter() - started
        finally:
            gc.enable()

    seconds(500)  # warm
    small, large = min(seconds(1_000) for _ in range(3)), min(seconds(8_000) for _ in range(3))
    # 8x the body: linear is about 8x, quadratic about 64x; the bound leaves room for a busy machine.
    assert large < 30 * small + 0.05, (small, large)


# ------------------------------------------------------------------ issue 47, classes 2 and 4: the server's own threads
def test_count_tokens_of_a_text_far_beyond_the_window_is_answered_at_once(server: BackgroundServer) -> None:
    """A 7.8 MiB text cannot fit any window this server has: it is not tokenized (7 s of CPU, outside every
    bound, before this) but refused in Anthropic's words; a text that may fit is counted; /health shows counting."""
    huge = {"model": "hammer", "messages": [{"role": "user", "content": "word " * (1_600_000)}]}
    reply = httpx.post(server.base_url + "/messages/count_tokens", json=huge, timeout=30, trust_env=False,
                       headers={"authorization": f"Bearer {KEY}"})
    assert reply.status_code == 400, reply.text[:300]
    kind, message = refusal(reply, "messages")
    assert kind == "invalid_request_error" and message.startswith("prompt is too long: ")
    small = {"model": "hammer", "messages": [{"role": "user", "content": "hi"}]}
    counted = httpx.post(server.base_url + "/messages/count_tokens", json=small, timeout=30, trust_env=False,
                         headers={"authorization": f"Bearer {KEY}"})
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 0
    health = httpx.get(server.base_url.removesuffix("/v1") + "/health", timeout=5, trust_env=False).json()
    assert health["counting"] == 0 and health["reading"] == 0  # both places given back


def test_health_checks_and_large_bodies_run_on_the_servers_own_threads() -> None:
    """Not on asyncio's default executor, which the engine's planning and other libraries share: six large
    bodies whose clients left made /health answer 503 there before this."""
    import threading

    seen: dict[str, str] = {}

    def check() -> None:
        seen["check"] = threading.current_thread().name

    def parse(body: Any, served: Any) -> Any:
        seen["parse"] = threading.current_thread().name
        return original(body, served)

    engine = HammerEngine(backend=ScriptedBackend(["[]"] * 10))
    import hammer_plugins.http_api.chat_completions.router as app_module

    original = app_module.read_chat
    app_module.read_chat = parse
    try:
        with BackgroundServer(create_app(engine, model_name="hammer", api_key=KEY, health_checks=[check])) as running:
            assert httpx.get(running.base_url.removesuffix("/v1") + "/health", timeout=5, trust_env=False).status_code == 200
            big = request("chat", metadata={"note": "x" * (300 * 1024)})  # over PARSE_OFF_LOOP_BYTES, ignored
            assert post(running, "chat", big).status_code == 200
    finally:
        app_module.read_chat = original
    assert seen["check"].startswith("hammer-health") and seen["parse"].startswith("hammer-request"), seen
