"""The ask-or-call rule at every API door (scripted backend, the real app): a call missing a value nobody gave
comes back as a plain-text question in the API's own shape, the held-back call in ``hammer_pending_calls``; sent
back, the next turn completes it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.http_api import BackgroundServer, create_app

KEY = "ask-test-key"
PAY_FINE = {"name": "pay_fine", "description": "Pay a traffic fine", "parameters": {"type": "object", "properties": {
    "city": {"type": "string", "description": "Violating city"},
    "plate": {"type": "string", "description": "License plate number"}}, "required": ["city", "plate"]}}
INVENTED = '[{"name": "pay_fine", "arguments": {"city": "Guangzhou", "plate": "ABC123"}}]'
COMPLETED = '[{"name": "pay_fine", "arguments": {"plate": "D456"}}]'
QUESTION = "Pay my traffic fine in Guangzhou"
ASKED = "Please provide the license plate number."
OPENAI_TOOLS = [{"type": "function", "function": PAY_FINE}]


def _post(running: Any, path: str, body: dict[str, Any]) -> httpx.Response:
    reply = httpx.post(running.url + path, json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=30,
                       trust_env=False)
    assert reply.status_code == 200, (path, reply.text)
    return reply


def _server(*outputs: str, on_missing: str = "ask") -> BackgroundServer:
    engine = HammerEngine(backend=ScriptedBackend(list(outputs)), on_missing=on_missing)  # type: ignore[arg-type]
    return BackgroundServer(create_app(engine, model_name="hammer", api_key=KEY))


def _pending(found: list[dict[str, Any]]) -> None:
    assert [(p["name"], p["arguments"], p["missing"]) for p in found] == [("pay_fine", {"city": "Guangzhou"}, ["plate"])]


def test_chat_completions_asks_then_completes_with_the_pending_call_sent_back() -> None:
    with _server(INVENTED, COMPLETED) as running:
        first = [{"role": "user", "content": QUESTION}]
        message = _post(running, "/v1/chat/completions", {"model": "hammer", "messages": first,
                                                          "tools": OPENAI_TOOLS}).json()["choices"][0]["message"]
        assert message["content"] == ASKED and not message.get("tool_calls")
        _pending(message["hammer_pending_calls"])
        history = [*first, {"role": "assistant", "content": message["content"],
                            "hammer_pending_calls": message["hammer_pending_calls"]},
                   {"role": "user", "content": "D456"}]
        choice = _post(running, "/v1/chat/completions", {"model": "hammer", "messages": history,
                                                         "tools": OPENAI_TOOLS}).json()["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == {"city": "Guangzhou",
                                                                                           "plate": "D456"}


def test_chat_completions_streams_the_question_and_the_pending_call() -> None:
    with _server(INVENTED) as running:
        reply = _post(running, "/v1/chat/completions", {"model": "hammer", "stream": True, "tools": OPENAI_TOOLS,
                                                        "messages": [{"role": "user", "content": QUESTION}]})
    chunks = [json.loads(line[6:]) for line in reply.text.splitlines() if line.startswith("data: {")]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == ASKED
    assert not any(d.get("tool_calls") for d in deltas)
    _pending(next(d["hammer_pending_calls"] for d in deltas if "hammer_pending_calls" in d))


def test_a_request_turns_the_rule_on_over_the_engine_s_setting() -> None:
    with _server(INVENTED, on_missing="call") as running:
        message = _post(running, "/v1/chat/completions", {"model": "hammer", "tools": OPENAI_TOOLS, "on_missing": "ask",
                                                          "messages": [{"role": "user", "content": QUESTION}]}
                        ).json()["choices"][0]["message"]
    assert message["content"] == ASKED


def test_responses_asks_in_its_own_shape_then_completes_with_its_output_sent_back() -> None:
    tools = [{"type": "function", **PAY_FINE}]
    with _server(INVENTED, COMPLETED) as running:
        body = _post(running, "/v1/responses", {"model": "hammer", "input": QUESTION, "tools": tools}).json()
        assert [item["type"] for item in body["output"]] == ["message"]
        assert body["output"][0]["content"][0]["text"] == ASKED
        _pending(body["hammer_pending_calls"])
        _pending(body["output"][0]["hammer_pending_calls"])  # on the item a client sends back as input
        items = [{"role": "user", "content": QUESTION}, *body["output"], {"role": "user", "content": "D456"}]
        done = _post(running, "/v1/responses", {"model": "hammer", "input": items, "tools": tools}).json()
    [call] = [item for item in done["output"] if item["type"] == "function_call"]
    assert json.loads(call["arguments"]) == {"city": "Guangzhou", "plate": "D456"}


def test_messages_asks_in_its_own_shape_then_completes_with_the_message_sent_back() -> None:
    tools = [{"name": "pay_fine", "description": PAY_FINE["description"], "input_schema": PAY_FINE["parameters"]}]
    with _server(INVENTED, COMPLETED) as running:
        first = [{"role": "user", "content": QUESTION}]
        body = _post(running, "/v1/messages", {"model": "hammer", "max_tokens": 64, "messages": first,
                                               "tools": tools}).json()
        assert [block["type"] for block in body["content"]] == ["text"] and body["content"][0]["text"] == ASKED
        assert body["stop_reason"] == "end_turn"
        _pending(body["hammer_pending_calls"])
        history = [*first, {"role": "assistant", "content": body["content"],
                            "hammer_pending_calls": body["hammer_pending_calls"]}, {"role": "user", "content": "D456"}]
        done = _post(running, "/v1/messages", {"model": "hammer", "max_tokens": 64, "messages": history,
                                               "tools": tools}).json()
    [use] = [block for block in done["content"] if block["type"] == "tool_use"]
    assert use["input"] == {"city": "Guangzhou", "plate": "D456"}


def test_ollama_asks_then_completes_with_the_pending_call_sent_back() -> None:
    with _server(INVENTED, COMPLETED) as running:
        first = [{"role": "user", "content": QUESTION}]
        message = _post(running, "/api/chat", {"model": "hammer", "stream": False, "messages": first,
                                               "tools": OPENAI_TOOLS}).json()["message"]
        assert message["content"] == ASKED and not message.get("tool_calls")
        _pending(message["hammer_pending_calls"])
        history = [*first, {"role": "assistant", "content": message["content"],
                            "hammer_pending_calls": message["hammer_pending_calls"]},
                   {"role": "user", "content": "D456"}]
        done = _post(running, "/api/chat", {"model": "hammer", "stream": False, "messages": history,
                                            "tools": OPENAI_TOOLS}).json()["message"]
    assert done["tool_calls"] == [{"function": {"name": "pay_fine", "arguments": {"city": "Guangzhou", "plate": "D456"}}}]


@pytest.mark.parametrize("junk", [[{"name": 3}], "not a list", [{"arguments": "x"}]])
def test_a_malformed_pending_call_sent_back_is_ignored(junk: Any) -> None:
    with _server('[{"name": "pay_fine", "arguments": {"city": "Guangzhou", "plate": "D456"}}]') as running:
        history = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": ASKED,
                                                            "hammer_pending_calls": junk},
                   {"role": "user", "content": "D456"}]
        message = _post(running, "/v1/chat/completions", {"model": "hammer", "messages": history,
                                                          "tools": OPENAI_TOOLS}).json()["choices"][0]["message"]
    assert json.loads(message["tool_calls"][0]["function"]["arguments"])["plate"] == "D456"
