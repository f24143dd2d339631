"""Every door asks, then completes the call on the next turn, on the real default model (llama.cpp, greedy).

The stand-in invents a plate number for "Pay my traffic fine from Guangzhou." (tests/real/test_ask_or_call_real.py
shows the engine hold it). Here each door the users have does the same in its own shape: ChatHammer, HammerLLM,
``hammer call`` and ``hammer chat``, and the server's Chat Completions, Responses, Messages and Ollama APIs, each
with the held-back call sent back the way that API's clients keep an assistant message. The model shares one load
(the session's engine) except in the CLI, which loads it as a user's command does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hammer_plugins import HammerEngine
from hammer_plugins.http_api import BackgroundServer, create_app

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(900)]

KEY = "ask-real-key"
QUESTION = "Pay my traffic fine from Guangzhou."
ANSWER = "The plate number is D456."
ASKED = "Please provide the license plate number."
PAY_FINE = {"name": "pay_fine", "description": "Pay a traffic violation fine", "parameters": {"type": "object",
            "properties": {"city": {"type": "string", "description": "Violating city"},
                           "plate_number": {"type": "string", "description": "License plate number"}},
            "required": ["city", "plate_number"]}}
OPENAI_TOOLS = [{"type": "function", "function": PAY_FINE}]
DONE = {"city": "Guangzhou", "plate_number": "D456"}


def _held(pending: list[dict[str, Any]]) -> str:
    [call] = pending
    assert (call["name"], call["arguments"], call["missing"]) == ("pay_fine", {"city": "Guangzhou"}, ["plate_number"])
    return str(call["id"])


def test_chat_hammer_asks_then_completes(llama_engine: HammerEngine) -> None:
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_hammer import ChatHammer

    llm = ChatHammer(backend=llama_engine.backend, max_tokens=160, on_missing="ask").bind_tools(OPENAI_TOOLS)
    history: list[Any] = [HumanMessage(QUESTION)]
    asked = llm.invoke(history)
    assert isinstance(asked, AIMessage) and asked.tool_calls == [] and asked.content == ASKED
    held = _held(asked.response_metadata["hammer_pending_calls"])
    done = llm.invoke([*history, asked, HumanMessage(ANSWER)])
    assert [(c["name"], c["args"], c["id"]) for c in done.tool_calls] == [("pay_fine", DONE, held)]


def pay_fine(city: str, plate_number: str) -> str:
    """Pay a traffic violation fine.

    Args:
        city: Violating city
        plate_number: License plate number
    """
    return "paid"


def test_hammer_llm_asks_then_completes(llama_engine: HammerEngine) -> None:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.hammer import HammerLLM

    llm = HammerLLM(backend=llama_engine.backend, max_tokens=160, on_missing="ask")
    tool = FunctionTool.from_defaults(pay_fine)
    history = [ChatMessage(role="user", content=QUESTION)]
    asked = llm.chat_with_tools([tool], chat_history=history)
    assert llm.get_tool_calls_from_response(asked, error_on_no_tool_call=False) == []
    assert asked.message.content == "Please provide the plate number."  # FunctionTool keeps no Args descriptions
    held = _held(asked.message.additional_kwargs["hammer_pending_calls"])
    done = llm.chat_with_tools([tool], chat_history=[*history, asked.message, ChatMessage(role="user", content=ANSWER)])
    [call] = llm.get_tool_calls_from_response(done)
    assert (call.tool_name, call.tool_kwargs, call.tool_id) == ("pay_fine", DONE, held)


@pytest.fixture
def tools_file(tmp_path: Path) -> str:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([PAY_FINE]), encoding="utf-8")
    return str(path)


def test_hammer_call_asks_and_hammer_chat_completes_on_the_next_line(hammer_main: Any, tools_file: str) -> None:
    result = hammer_main("call", QUESTION, "--tools", tools_file, "--n-ctx", "4096")  # no --on-missing: it asks
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ASKED
    assert 'pending: pay_fine({"city": "Guangzhou"}), missing plate_number' in result.stderr
    chat = hammer_main("chat", "--tools", tools_file, "--n-ctx", "4096", "--max-tokens", "80",
                       stdin=f"{QUESTION}\n{ANSWER}\n")
    assert chat.returncode == 0, chat.stderr
    assert f"hammer> {ASKED}" in chat.stdout
    assert f"call pay_fine({json.dumps(DONE)})" in chat.stdout


@pytest.fixture(scope="module")
def server(llama_engine: HammerEngine) -> Iterator[BackgroundServer]:
    engine = HammerEngine(backend=llama_engine.backend, max_tokens=160, on_missing="ask")
    with BackgroundServer(create_app(engine, model_name="hammer", api_key=KEY)) as running:
        yield running


def _post(server: BackgroundServer, path: str, body: dict[str, Any]) -> dict[str, Any]:
    reply = httpx.post(server.url + path, json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=300,
                       trust_env=False)
    assert reply.status_code == 200, (path, reply.text)
    return dict(reply.json())


def test_chat_completions_asks_then_completes(server: BackgroundServer) -> None:
    first = [{"role": "user", "content": QUESTION}]
    message = _post(server, "/v1/chat/completions", {"model": "hammer", "messages": first,
                                                     "tools": OPENAI_TOOLS})["choices"][0]["message"]
    assert message["content"] == ASKED and not message.get("tool_calls")
    held = _held(message["hammer_pending_calls"])
    history = [*first, {"role": "assistant", "content": message["content"],
                        "hammer_pending_calls": message["hammer_pending_calls"]}, {"role": "user", "content": ANSWER}]
    done = _post(server, "/v1/chat/completions", {"model": "hammer", "messages": history,
                                                  "tools": OPENAI_TOOLS})["choices"][0]
    [call] = done["message"]["tool_calls"]
    assert (call["id"], json.loads(call["function"]["arguments"])) == (held, DONE)
    assert done["finish_reason"] == "tool_calls"


def test_responses_asks_then_completes(server: BackgroundServer) -> None:
    tools = [{"type": "function", **PAY_FINE}]
    body = _post(server, "/v1/responses", {"model": "hammer", "input": QUESTION, "tools": tools})
    assert [item["type"] for item in body["output"]] == ["message"]
    assert body["output"][0]["content"][0]["text"] == ASKED
    held = _held(body["output"][0]["hammer_pending_calls"])  # on the item a client sends back as input
    items = [{"role": "user", "content": QUESTION}, *body["output"], {"role": "user", "content": ANSWER}]
    done = _post(server, "/v1/responses", {"model": "hammer", "input": items, "tools": tools})
    [call] = [item for item in done["output"] if item["type"] == "function_call"]
    assert (call["call_id"], json.loads(call["arguments"])) == (held, DONE)


def test_messages_asks_then_completes(server: BackgroundServer) -> None:
    tools = [{"name": "pay_fine", "description": PAY_FINE["description"], "input_schema": PAY_FINE["parameters"]}]
    first = [{"role": "user", "content": QUESTION}]
    body = _post(server, "/v1/messages", {"model": "hammer", "max_tokens": 160, "messages": first, "tools": tools})
    assert [block["type"] for block in body["content"]] == ["text"] and body["content"][0]["text"] == ASKED
    assert body["stop_reason"] == "end_turn"
    held = _held(body["hammer_pending_calls"])
    history = [*first, {"role": "assistant", "content": body["content"],
                        "hammer_pending_calls": body["hammer_pending_calls"]}, {"role": "user", "content": ANSWER}]
    done = _post(server, "/v1/messages", {"model": "hammer", "max_tokens": 160, "messages": history, "tools": tools})
    [use] = [block for block in done["content"] if block["type"] == "tool_use"]
    assert (use["id"], use["input"]) == (held, DONE) and done["stop_reason"] == "tool_use"


def test_ollama_asks_then_completes(server: BackgroundServer) -> None:
    first = [{"role": "user", "content": QUESTION}]
    message = _post(server, "/api/chat", {"model": "hammer", "stream": False, "messages": first,
                                          "tools": OPENAI_TOOLS})["message"]
    assert message["content"] == ASKED and not message.get("tool_calls")
    _held(message["hammer_pending_calls"])
    history = [*first, {"role": "assistant", "content": message["content"],
                        "hammer_pending_calls": message["hammer_pending_calls"]}, {"role": "user", "content": ANSWER}]
    done = _post(server, "/api/chat", {"model": "hammer", "stream": False, "messages": history,
                                       "tools": OPENAI_TOOLS})["message"]
    assert done["tool_calls"] == [{"function": {"name": "pay_fine", "arguments": DONE}}]  # Ollama's calls carry no id
