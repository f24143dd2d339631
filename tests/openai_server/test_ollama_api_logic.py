"""Ollama's native API on a scripted engine (no model), checked by the official ``ollama`` client's own types:
every NDJSON line and every body validates as its ``ChatResponse`` / ``GenerateResponse`` / ``ListResponse``
/ ``ShowResponse`` / ``ProcessResponse`` (extra fields forbidden, so a misnamed field fails), against a real
uvicorn on a loopback port. Then what the door decides where Ollama is silent: which call a ``tool`` turn
answers, ``format``, ``options``, Ollama's "load" answer, the refusal, and the errors in Ollama's shape."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import ollama
import pytest
from ollama import ChatResponse, GenerateResponse, ListResponse, ProcessResponse, ShowResponse
from openai_server_helpers import scripted_answer
from pydantic import BaseModel

from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.http_api import BackgroundServer, create_app
from hammer_plugins.http_api.errors import APIError
from hammer_plugins.http_api.ollama.request import OllamaChatRequest, OllamaGenerateRequest, read_ollama

# The scripted answers here are keyed by codes ("Q-TWO"), not by questions that hold their values: these tests are
# about the wire format, so the ask-or-call rule is off whatever the default; tests/openai_server/test_ask_or_call_doors.py
# tests it at each door.
RULE_OFF = "call"

REFUSAL = "Sorry, no tool is suitable for your request."
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
                                           "parameters": WEATHER}}]


@pytest.fixture(scope="module")
def backend() -> ScriptedBackend:
    return ScriptedBackend(responder=scripted_answer)


@pytest.fixture(scope="module")
def server(backend: ScriptedBackend) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(HammerEngine(backend=backend, on_missing=RULE_OFF), model_name="hammer")) as running:
        yield running


def strict(model: type[BaseModel], data: dict[str, Any]) -> BaseModel:
    """``data`` validated as the ollama client's ``model`` with no field the client does not know."""
    class Strict(model):  # type: ignore[misc, valid-type]
        model_config = {**model.model_config, "extra": "forbid"}

    return Strict.model_validate(data)


def lines(server: BackgroundServer, path: str, body: dict[str, Any]) -> tuple[httpx.Response, list[dict[str, Any]]]:
    with httpx.stream("POST", server.url + path, json=body, timeout=30, trust_env=False) as reply:
        reply.read()
    return reply, [json.loads(line) for line in reply.text.splitlines()]


# ------------------------------------------------------------------ the wire, by the client's own types
def test_a_streamed_call_is_ndjson_the_client_reads(server: BackgroundServer) -> None:
    reply, objects = lines(server, "/api/chat", {"model": "hammer", "tools": TOOLS,
                                                 "messages": [{"role": "user", "content": "Q-TWO"}]})
    assert reply.headers["content-type"].startswith("application/x-ndjson") and reply.text.endswith("\n")
    parts = [strict(ChatResponse, o) for o in objects]  # no comment pings: every line is an object
    assert [p.done for p in parts] == [False, False, True] and parts[-1].done_reason == "stop"
    assert [c.function.arguments["city"] for p in parts for c in p.message.tool_calls or []] == ["Paris", "Rome"]
    assert parts[-1].prompt_eval_count and parts[-1].eval_count and parts[-1].total_duration


def test_prose_streams_in_pieces_that_join_to_the_answer(server: BackgroundServer) -> None:
    client = ollama.Client(host=server.url)
    pieces = list(client.chat(model="hammer", messages=[{"role": "user", "content": "hello"}], stream=True))
    whole = client.chat(model="hammer:latest", messages=[{"role": "user", "content": "hello"}], stream=False)
    strict(ChatResponse, whole.model_dump(exclude_none=True))
    assert len(pieces) > 2 and "".join(p.message.content or "" for p in pieces) == whole.message.content
    assert whole.message.content == "Hello there, friend." and whole.model == "hammer:latest"


def test_a_tool_turn_named_by_tool_name_is_answered(server: BackgroundServer) -> None:
    client = ollama.Client(host=server.url)
    question = [{"role": "user", "content": "What's the weather in Paris?"}]
    first = client.chat(model="hammer", messages=question, tools=TOOLS, stream=False)
    [call] = first.message.tool_calls or []
    second = client.chat(model="hammer", tools=TOOLS, stream=False, messages=[
        *question, first.message, {"role": "tool", "tool_name": "get_weather", "content": "18 C and sunny"}])
    assert second.message.content == "It is 18 C in Paris." and not second.message.tool_calls


def test_generate_and_the_model_routes_validate_as_the_clients_types(server: BackgroundServer) -> None:
    _, objects = lines(server, "/api/generate", {"model": "hammer", "prompt": "hello"})
    parts = [strict(GenerateResponse, o) for o in objects]
    assert "".join(p.response for p in parts) == "Hello there, friend." and parts[-1].done
    tags = httpx.get(server.url + "/api/tags").json()
    assert strict(ListResponse, tags).models[0].model == "hammer:latest"  # type: ignore[attr-defined]
    shown = strict(ShowResponse, httpx.post(server.url + "/api/show", json={"model": "hammer"}).json())
    assert shown.capabilities == ["completion", "tools"]  # type: ignore[attr-defined]
    assert shown.modelinfo["hammer.context_length"] == 32768  # type: ignore[attr-defined]
    strict(ProcessResponse, httpx.get(server.url + "/api/ps").json())
    assert httpx.get(server.url + "/api/version").json()["version"].count(".") == 2


def test_nothing_to_generate_is_ollamas_load_answer_and_runs_nothing(server: BackgroundServer,
                                                                     backend: ScriptedBackend) -> None:
    before = len(backend.prompts)
    for path, body in (("/api/chat", {"model": "hammer", "messages": []}), ("/api/generate", {"model": "hammer"})):
        reply = httpx.post(server.url + path, json=body)
        assert reply.status_code == 200 and reply.json()["done_reason"] == "load" and reply.json()["done"]
    assert len(backend.prompts) == before


def test_a_refusal_is_answered_in_prose_unless_the_refusal_text_is_asked_for(server: BackgroundServer) -> None:
    client = ollama.Client(host=server.url)
    question = [{"role": "user", "content": "Q-REFUSE"}]
    assert client.chat(model="hammer", messages=question, tools=TOOLS, stream=False).message.content == \
        "Hello there, friend."
    reply = httpx.post(server.url + "/api/chat", json={"model": "hammer", "messages": question, "tools": TOOLS,
                                                       "stream": False, "on_refusal": "message"})
    assert reply.json()["message"]["content"] == REFUSAL and reply.headers["x-hammer-refusal"] == "true"


def test_errors_are_ollamas_shape_and_the_client_raises_them(server: BackgroundServer) -> None:
    client = ollama.Client(host=server.url)
    with pytest.raises(ollama.ResponseError) as unknown:
        client.chat(model="llama3.2", messages=[{"role": "user", "content": "hi"}])
    assert unknown.value.status_code == 404 and "'hammer'" in unknown.value.error
    reply = httpx.post(server.url + "/api/chat", json={"model": "hammer", "messages": [
        {"role": "user", "content": "hi"}, {"role": "tool", "tool_name": "get_weather", "content": "x"}]})
    assert reply.status_code == 400 and set(reply.json()) == {"error"} and "messages[1]" in reply.json()["error"]
    assert httpx.get(server.url + "/api/nothing").json().keys() == {"error"}


# ------------------------------------------------------------------ the parser: where Ollama is silent
def call_of(body: dict[str, Any]) -> Any:
    chat, call = read_ollama({"model": "hammer", "tools": TOOLS, **body}, "hammer", OllamaChatRequest)
    assert call is not None
    return call


def test_a_tool_turn_answers_by_id_by_name_or_by_place() -> None:
    calls = [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
             {"id": "given", "function": {"name": "get_time", "arguments": "{\"zone\": \"CET\"}"}},
             {"function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": calls}]
    results = [{"role": "tool", "tool_call_id": "given", "content": "b"},  # ChatOllama: the id it sent
               {"role": "tool", "tool_name": "get_weather", "content": "a"},  # Ollama's clients: the name
               {"role": "tool", "content": "c"}]  # LlamaIndex: nothing, the next call in order
    messages = call_of({"messages": history + results}).messages
    assistant = messages[1]
    assert [c.id for c in assistant.tool_calls] == ["call_1_0", "given", "call_1_2"]
    assert assistant.tool_calls[1].arguments == {"zone": "CET"}  # a JSON string read as the object
    assert [m.tool_call_id for m in messages[2:]] == ["given", "call_1_0", "call_1_2"]
    with pytest.raises(APIError) as extra:  # a fourth result answers nothing
        call_of({"messages": history + results + [{"role": "tool", "content": "d"}]})
    assert extra.value.param == "messages[5].tool_name"


def test_format_options_and_hammers_own_fields() -> None:
    body = {"model": "hammer", "tools": TOOLS, "messages": [{"role": "user", "content": "q"}], "format": "json",
            "stream": False, "options": {"num_predict": -1, "temperature": 0.2, "stop": ["\n\n"], "num_ctx": 99999,
                                         "mirostat": 2, "seed": 7}, "keep_alive": "5m", "think": False,
            "tool_choice": "required", "mask_names": True}
    chat, call = read_ollama(body, "hammer", OllamaChatRequest)
    assert call is not None and chat.stream is False
    assert call.response_format == {"type": "json_object"} and call.max_tokens is None
    assert (call.temperature, call.stop, call.seed) == (0.2, ("\n\n",), 7)
    assert call.tool_choice == "required" and call.mask_names is True
    assert call.on_refusal == "answer"
    schema = call_of({"messages": [{"role": "user", "content": "q"}], "format": WEATHER}).response_format
    assert schema == {"type": "json_schema", "json_schema": {"name": "format", "schema": WEATHER}}
    assert call_of({"messages": [{"role": "user", "content": "q"}]}).tool_choice == "auto"


@pytest.mark.parametrize(("body", "param"), [
    ({"raw": True}, "raw"), ({"suffix": "}"}, "suffix"), ({"images": ["aGk="]}, "images"),
    ({"template": "{{ .Prompt }}"}, "template"), ({"options": {"num_predict": -3}}, "options.num_predict"),
])
def test_generate_refuses_what_hammers_prompt_cannot_take(body: dict[str, Any], param: str) -> None:
    with pytest.raises(APIError) as refused:
        read_ollama({"model": "hammer", "prompt": "hi", **body}, "hammer", OllamaGenerateRequest)
    assert refused.value.status == 400 and refused.value.param == param


def test_chat_refuses_images_and_a_format_that_is_no_schema() -> None:
    for body, param in (({"messages": [{"role": "user", "content": "q", "images": ["aGk="]}]}, "messages[0].images"),
                        ({"messages": [{"role": "user", "content": "q"}], "format": "yaml"}, "format")):
        with pytest.raises(APIError) as refused:
            call_of(body)
        assert refused.value.param == param
    assert call_of({"messages": [{"role": "user", "content": "q", "images": []}]})  # ChatOllama's empty list
