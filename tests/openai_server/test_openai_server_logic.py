"""The OpenAI-compatible server's contract on a scripted engine (no model): the openai SDK and raw HTTP
against a real uvicorn on a free loopback port. Refusals, streaming, options, queueing, cancellation,
and the error table (status, type, code, param, message)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from hammer_plugins import GenerationChunk, GenerationSettings, HammerEngine, ScriptedBackend
from hammer_plugins.backends.base import Backend, Usage
from hammer_plugins.http_api import BackgroundServer, create_app
from hammer_plugins.launch.child import exposure_warning
from hammer_plugins.tools.definition import to_tools
from hammer_plugins.tools.demo import DEMO_TOOLS

# The scripted answers here are keyed by codes ("Q-TWO"), not by questions that hold their values: these tests are
# about the wire format, so the ask-or-call rule is off whatever the default; tests/openai_server/test_ask_or_call_doors.py
# tests it at each door.
RULE_OFF = "call"

KEY = "test-key"
TOOLS = [t.to_openai() for t in to_tools(DEMO_TOOLS)]
PARIS_ROME = ('[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
              '{"name": "get_weather", "arguments": {"city": "Rome", "unit": "celsius"}}]')


def last_user_turn(prompt: str) -> str:
    return prompt.rsplit("<|im_start|>user\n", 1)[-1]


def responder(prompt: str) -> str:
    """Answers by a marker in the last user turn (the tools block mentions weather too)."""
    question = last_user_turn(prompt)
    if "Q-REFUSE" in question and "[BEGIN OF AVAILABLE TOOLS]" in prompt:
        return "[]"  # the tool-free second pass of on_refusal="answer" answers in prose
    if "Q-TWO" in question:
        return PARIS_ROME
    if "Q-CALC" in question:
        number = question.split("Q-CALC ")[1].split()[0]
        return json.dumps([{"name": "calculate", "arguments": {"expression": f"{number} * 7"}}])
    if "Q-JSON" in question:
        return '{"city": "Paris"}'
    if "Q-CALL" in question:
        return '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    return "Hello there, friend."


@pytest.fixture(scope="module")
def backend() -> ScriptedBackend:
    return ScriptedBackend(responder=responder)


@pytest.fixture(scope="module")
def server(backend: ScriptedBackend) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(HammerEngine(backend=backend, on_missing=RULE_OFF), model_name="hammer",
                                     api_key=KEY)) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: BackgroundServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def post(server: BackgroundServer, body: Any, key: str | None = KEY, **kwargs: Any) -> httpx.Response:
    headers = {"content-type": "application/json", **({"authorization": f"Bearer {key}"} if key else {})}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(server.base_url + "/chat/completions", content=content, headers=headers, timeout=30, **kwargs)


# ------------------------------------------------------------------ answers
def test_calls_have_unique_ids_string_arguments_and_finish_reason_tool_calls(client: OpenAI) -> None:
    reply = client.chat.completions.create(model="hammer", messages=user("Q-TWO"), tools=TOOLS)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    calls = choice.message.tool_calls
    assert [c.function.name for c in calls] == ["get_weather", "get_weather"]
    assert [json.loads(c.function.arguments)["city"] for c in calls] == ["Paris", "Rome"]
    assert all(c.id.startswith("call_") and c.type == "function" for c in calls) and calls[0].id != calls[1].id
    assert reply.usage.total_tokens == reply.usage.prompt_tokens + reply.usage.completion_tokens > 0
    assert reply.object == "chat.completion" and reply.model == "hammer" and reply.id.startswith("chatcmpl-")


def test_refusal_is_the_content_with_a_refusal_field_and_a_header(client: OpenAI) -> None:
    raw = client.chat.completions.with_raw_response.create(model="hammer", messages=user("Q-REFUSE"), tools=TOOLS)
    assert raw.headers["x-hammer-refusal"] == "true"
    choice = raw.parse().choices[0]
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    assert choice.message.content == choice.message.refusal == "Sorry, no tool is suitable for your request."
    ordinary = client.chat.completions.with_raw_response.create(model="hammer", messages=user("Q-CALL"), tools=TOOLS)
    assert "x-hammer-refusal" not in ordinary.headers and ordinary.parse().choices[0].message.refusal is None


def test_refusal_answer_mode_answers_in_prose(client: OpenAI) -> None:
    reply = client.chat.completions.create(model="hammer", messages=user("Q-REFUSE"), tools=TOOLS,
                                           extra_body={"on_refusal": "answer"})
    message = reply.choices[0].message
    assert message.content == "Hello there, friend." and message.refusal  # the second, tool-free pass


def test_streamed_refusal_carries_content_and_refusal(client: OpenAI) -> None:
    chunks = list(client.chat.completions.create(model="hammer", messages=user("Q-REFUSE"), tools=TOOLS, stream=True))
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert "".join(d.content or "" for d in deltas) == "Sorry, no tool is suitable for your request."
    assert [d.refusal for d in deltas if d.refusal] == ["Sorry, no tool is suitable for your request."]
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_streamed_calls_open_with_id_and_name_then_arguments_join(client: OpenAI) -> None:
    stream = client.chat.completions.create(model="hammer", messages=user("Q-TWO"), tools=TOOLS, stream=True,
                                            stream_options={"include_usage": True})
    chunks = list(stream)
    first: dict[int, Any] = {}
    arguments: dict[int, str] = {}
    for chunk in chunks:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            if call.index not in first:
                first[call.index] = call
            else:
                assert call.id is None and call.function.name is None  # later deltas: arguments only
            arguments[call.index] = arguments.get(call.index, "") + (call.function.arguments or "")
    assert sorted(first) == [0, 1]
    for call in first.values():
        assert call.id.startswith("call_") and call.type == "function" and call.function.name == "get_weather"
    assert [json.loads(arguments[i])["city"] for i in (0, 1)] == ["Paris", "Rome"]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    assert all(c.usage is None for c in chunks[:-1]) and len({c.id for c in chunks}) == 1


def test_stream_ends_with_done_and_sends_no_call_syntax_as_content(server: BackgroundServer) -> None:
    body = {"model": "hammer", "messages": user("Q-CALL"), "tools": TOOLS, "stream": True}
    with httpx.stream("POST", server.base_url + "/chat/completions", json=body,
                      headers={"authorization": f"Bearer {KEY}"}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]" and all(line.startswith("data: ") for line in lines)
    assert '"name\\": \\"get_weather' not in "".join(lines)  # Hammer's JSON list is not echoed as content


def test_prose_streams_as_content(client: OpenAI) -> None:
    chunks = list(client.chat.completions.create(model="hammer", messages=user("hello"), stream=True))
    pieces = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(pieces) > 1 and "".join(pieces) == "Hello there, friend."


def test_response_format_json_schema_puts_the_json_in_content(client: OpenAI, backend: ScriptedBackend) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    reply = client.chat.completions.create(model="hammer", messages=user("Q-JSON"), response_format={
        "type": "json_schema", "json_schema": {"name": "place", "schema": schema}})
    assert json.loads(reply.choices[0].message.content) == {"city": "Paris"}
    assert backend.grammars[-1] is not None  # constrained to the schema


def test_history_with_calls_and_results_reaches_the_prompt(client: OpenAI, backend: ScriptedBackend) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_abc", "content": '{"temp": 21}'},
    ]
    reply = client.chat.completions.create(model="hammer", messages=messages, tools=TOOLS)
    prompt = backend.prompts[-1]
    assert "21" in prompt and "get_weather" in prompt and "Be brief." in prompt
    assert reply.choices[0].finish_reason == "stop" and reply.choices[0].message.content


def test_sampling_and_engine_options_reach_the_engine(client: OpenAI, backend: ScriptedBackend) -> None:
    client.chat.completions.create(model="hammer", messages=user("Q-CALL"), tools=TOOLS, temperature=0.5, top_p=0.9,
                                   seed=7, stop="END", max_completion_tokens=33, extra_body={"mask_names": True,
                                                                                              "top_k": 5})
    settings = backend.settings[-1]
    assert (settings.temperature, settings.top_p, settings.seed, settings.stop, settings.max_tokens, settings.top_k) \
        == (0.5, 0.9, 7, ["END"], 33, 5)
    assert '"name": "get_weather"' not in backend.prompts[-1]  # masked names
    client.chat.completions.create(model="hammer", messages=user("Q-CALL"), tools=TOOLS, max_tokens=21)
    assert backend.settings[-1].max_tokens == 21 and backend.settings[-1].temperature == 0.0  # greedy by default


def test_models_and_health(server: BackgroundServer, client: OpenAI) -> None:
    assert [m.id for m in client.models.list()] == ["hammer"]
    assert client.models.retrieve("hammer").id == "hammer"
    health = httpx.get(server.url + "/health").json()
    assert health["status"] == "ok" and health["model"] == "hammer"


# ------------------------------------------------------------------ errors
LONG = "word " * 40_000  # about 50,000 scripted tokens: over the 32,768 context window
ERRORS = [
    ("malformed JSON", b'{"model": "hammer", "messages": [', KEY, 400, "invalid_json", None, "could not parse the JSON"),
    ("not an object", b"[1, 2]", KEY, 400, "invalid_json", None, "must be a JSON object"),
    ("no key", {"model": "hammer", "messages": user("hi")}, None, 401, "missing_api_key", None, "Missing API key"),
    ("wrong key", {"model": "hammer", "messages": user("hi")}, "nope", 401, "invalid_api_key", None, "Incorrect API key"),
    ("wrong model", {"model": "gpt-4o", "messages": user("hi")}, KEY, 404, "model_not_found", "model", "'gpt-4o' does not exist"),
    ("unknown tool_choice", {"model": "hammer", "messages": user("hi"), "tools": TOOLS, "tool_choice": {
        "type": "function", "function": {"name": "get_time"}}}, KEY, 400, "invalid_tool_choice", "tool_choice",
     "'get_time' is not among the bound tools"),
    ("required without tools", {"model": "hammer", "messages": user("hi"), "tool_choice": "required"}, KEY, 400,
     "invalid_value", "tool_choice", "needs tools"),
    ("over the context window", {"model": "hammer", "messages": user(LONG)}, KEY, 400, "context_length_exceeded",
     "messages", "maximum context length is 32768 tokens. However, your messages resulted in"),
    ("n=2", {"model": "hammer", "messages": user("hi"), "n": 2}, KEY, 400, "unsupported_value", "n", "n=2 is not supported"),
    ("bad temperature", {"model": "hammer", "messages": user("hi"), "temperature": 5}, KEY, 400, "invalid_value",
     "temperature", "Invalid value for 'temperature'"),
    ("missing messages", {"model": "hammer"}, KEY, 400, "invalid_value", "messages", "Field required"),
    ("empty messages", {"model": "hammer", "messages": []}, KEY, 400, "invalid_value", "messages", "at least one"),
    ("bad role", {"model": "hammer", "messages": [{"role": "robot", "content": "x"}]}, KEY, 400, "invalid_value",
     "messages[0].role", "Invalid role 'robot'"),
    ("image part", {"model": "hammer", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {
        "url": "http://x"}}]}]}, KEY, 400, "unsupported_value", "messages[0].content[0].type",
     "'image_url', which this server does not take"),
    ("tool result without id", {"model": "hammer", "messages": user("hi") + [{"role": "tool", "content": "1"}]}, KEY, 400,
     "invalid_value", "messages[1].tool_call_id", "needs tool_call_id"),
    ("arguments not JSON", {"model": "hammer", "messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
     "function": {"name": "f", "arguments": "{oops"}}]}]}, KEY, 400, "invalid_value",
     "messages[0].tool_calls[0].function.arguments", "must be a JSON object"),
    ("bad tool schema", {"model": "hammer", "messages": user("hi"), "tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "complex"}}}}}]}, KEY, 400,
     "invalid_tool_schema", "tools[0].function.parameters", "tool 'f', field 'x.type'"),
    ("non-function tool", {"model": "hammer", "messages": user("hi"), "tools": [{"type": "custom", "custom": {"name": "f"}}]},
     KEY, 400, "unsupported_value", "tools[0].type", "only tools of type 'function'"),
    ("bad response_format", {"model": "hammer", "messages": user("hi"), "response_format": {"type": "xml"}}, KEY, 400,
     "unsupported_value", "response_format.type", "'xml' is not supported"),
    ("legacy functions", {"model": "hammer", "messages": user("hi"), "functions": [{"name": "f"}]}, KEY, 400,
     "unsupported_value", "functions", "Fix: send 'tools'"),
    ("logprobs", {"model": "hammer", "messages": user("hi"), "logprobs": True}, KEY, 400, "unsupported_value", "logprobs",
     "not supported"),
]


@pytest.mark.parametrize(("body", "key", "status", "code", "param", "fragment"), [e[1:] for e in ERRORS],
                         ids=[e[0] for e in ERRORS])
def test_error_table(server: BackgroundServer, body: Any, key: str | None, status: int, code: str, param: str | None,
                     fragment: str) -> None:
    response = post(server, body, key)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == code and error["param"] == param and fragment in error["message"], error
    assert error["type"] == ("authentication_error" if status == 401 else "invalid_request_error")
    assert "Traceback" not in response.text


def test_the_sdk_raises_its_own_errors(server: BackgroundServer, client: OpenAI) -> None:
    with pytest.raises(openai.AuthenticationError):
        OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0).models.list()
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="gpt-4o", messages=user("hi"))
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as over:
        client.chat.completions.create(model="hammer", messages=user(LONG), stream=True)
    assert over.value.code == "context_length_exceeded"  # before the stream's headers: a plain 400


def test_oversized_bodies_get_413_by_length_and_when_chunked(server: BackgroundServer) -> None:
    big = json.dumps({"model": "hammer", "messages": user("x" * (9 * 2**20))}).encode()
    response = post(server, big)
    assert response.status_code == 413 and response.json()["error"]["code"] == "request_too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server counts as the body arrives
        for _ in range(10):
            yield b" " * 2**20

    chunked = httpx.post(server.base_url + "/chat/completions", content=chunks(),
                         headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"}, timeout=30)
    assert chunked.status_code == 413


def test_unknown_route_and_method_are_json_errors(server: BackgroundServer) -> None:
    auth = {"authorization": f"Bearer {KEY}"}
    assert httpx.get(server.url + "/v1/nothing", headers=auth).json()["error"]["type"] == "not_found"
    wrong = httpx.get(server.base_url + "/chat/completions", headers=auth)
    assert wrong.status_code == 405 and "error" in wrong.json()
    # without the key every path but /health is 401, before any routing (issue 37: the key comes first)
    assert httpx.get(server.url + "/v1/nothing").json()["error"]["code"] == "missing_api_key"


def test_health_needs_no_key_but_models_does(server: BackgroundServer) -> None:
    assert httpx.get(server.url + "/health").status_code == 200
    assert httpx.get(server.base_url + "/models").status_code == 401


# ------------------------------------------------------------------ queueing and cancellation
class SlowBackend(Backend):
    """Writes ``words`` words, ``delay`` seconds apart; records concurrency and closed generations."""

    name = "slow"

    def __init__(self, words: int = 200, delay: float = 0.02) -> None:
        super().__init__()
        self.words = words
        self.delay = delay
        self.active = 0
        self.max_active = 0
        self.produced: list[int] = []
        self.closed = 0
        self.prompts: list[str] = []

    model_name = "slow"  # type: ignore[assignment]
    context_window = 32768  # type: ignore[assignment]

    def load(self) -> None:
        return None

    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    def _stream(self, prompt: str, settings: GenerationSettings, grammar: Any) -> Iterator[GenerationChunk]:
        self.prompts.append(prompt)
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        count = 0
        try:
            answer = responder(prompt)
            if answer != "Hello there, friend.":  # a scripted call: all at once
                time.sleep(self.delay * 5)
                count = 1
                yield GenerationChunk(text=answer)
            else:
                for _ in range(self.words):
                    time.sleep(self.delay)
                    count += 1
                    yield GenerationChunk(text="word ")
            yield GenerationChunk(text="", finish_reason="stop", usage=Usage(prompt_tokens=10, completion_tokens=count))
        except GeneratorExit:
            self.closed += 1
            raise
        finally:
            self.produced.append(count)
            self.active -= 1


@pytest.fixture
def slow() -> Iterator[tuple[SlowBackend, BackgroundServer]]:
    backend = SlowBackend()
    with BackgroundServer(create_app(HammerEngine(backend=backend, on_missing=RULE_OFF))) as running:
        yield backend, running


def test_a_client_that_disconnects_mid_stream_stops_the_generation(slow: tuple[SlowBackend, BackgroundServer]) -> None:
    backend, server = slow
    body = {"model": "hammer", "messages": user("tell me a story"), "stream": True}
    with httpx.stream("POST", server.base_url + "/chat/completions", json=body) as response:
        seen = 0
        for line in response.iter_lines():
            seen += "word" in line
            if seen == 3:
                break  # leaving the block closes the connection
    deadline = time.monotonic() + 10
    while not backend.produced and time.monotonic() < deadline:
        time.sleep(0.05)
    assert backend.closed == 1 and backend.produced[0] < backend.words, backend.produced
    assert httpx.get(server.url + "/health").json()["cancelled"] == 1
    # The engine is free again: the next request is answered.
    reply = OpenAI(base_url=server.base_url, api_key="none").chat.completions.create(
        model="hammer", messages=user("Q-CALC 3"), tools=TOOLS)
    assert reply.choices[0].message.tool_calls[0].function.name == "calculate"


def test_a_client_that_disconnects_from_a_non_streamed_request_stops_the_generation(
        slow: tuple[SlowBackend, BackgroundServer]) -> None:
    backend, server = slow  # 200 words, 0.02 s apart: 4 s if nobody stops it
    body = {"model": "hammer", "messages": user("tell me a story")}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.base_url + "/chat/completions", json=body, timeout=httpx.Timeout(10, read=0.5))
    deadline = time.monotonic() + 10
    while not backend.produced and time.monotonic() < deadline:
        time.sleep(0.05)
    assert backend.closed == 1 and backend.produced[0] < backend.words / 2, backend.produced
    assert httpx.get(server.url + "/health").json()["cancelled"] == 1
    reply = OpenAI(base_url=server.base_url, api_key="none").chat.completions.create(
        model="hammer", messages=user("Q-CALC 3"), tools=TOOLS)
    assert reply.choices[0].message.tool_calls[0].function.name == "calculate"


def test_concurrent_requests_run_one_at_a_time_each_with_its_own_answer(
        slow: tuple[SlowBackend, BackgroundServer]) -> None:
    backend, server = slow
    numbers = [11, 23, 37, 59, 71, 83]
    answers: dict[int, str] = {}

    def ask(number: int) -> None:
        client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
        reply = client.chat.completions.create(model="hammer", messages=user(f"Q-CALC {number} please"), tools=TOOLS)
        answers[number] = json.loads(reply.choices[0].message.tool_calls[0].function.arguments)["expression"]

    threads = [threading.Thread(target=ask, args=(n,)) for n in numbers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert answers == {n: f"{n} * 7" for n in numbers}
    assert backend.max_active == 1 and len(backend.prompts) == len(numbers)
    assert httpx.get(server.url + "/health").json()["peak_running"] == 1


# ------------------------------------------------------------------ process hygiene
def test_importing_the_package_loads_no_web_stack() -> None:
    script = ("import sys, hammer_plugins, hammer_plugins.http_api\n"
              "print(sorted(m for m in ('fastapi', 'uvicorn', 'starlette', 'openai') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "[]", result.stderr


def test_a_warning_when_exposed_without_a_key() -> None:
    assert "without an API key" in (exposure_warning("0.0.0.0", None) or "")
    assert exposure_warning("0.0.0.0", "k") is None and exposure_warning("127.0.0.1", None) is None
