"""ChatHammer and HammerLLM, unchanged, on the server backend: the same adapters, a remote model.

Each adapter takes the backend instance (``backend=OpenAICompatibleBackend(...)``) and everything
else (prompt, grammar, parsing, refusal mapping) stays in the engine, on this side of the wire.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hammer_plugins.backends.remote import OpenAICompatibleBackend
from hammer_plugins.tools.demo import get_weather, send_email

pytestmark = [
    pytest.mark.real_model,
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20",
                               "ignore::pydantic.warnings.PydanticDeprecatedSince211"),
]


def test_chat_hammer_calls_streams_and_refuses_through_the_server(backend: OpenAICompatibleBackend) -> None:
    import langchain_hammer
    llm = langchain_hammer.ChatHammer(backend=backend, max_tokens=128)
    bound = llm.bind_tools([get_weather, send_email])
    invoked = bound.invoke("What's the weather in Paris?")
    assert [(c["name"], c["args"]["city"]) for c in invoked.tool_calls] == [("get_weather", "Paris")]
    assert invoked.usage_metadata and invoked.usage_metadata["input_tokens"] > 100
    chunks = list(bound.stream("What's the weather in Paris?"))
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged = merged + chunk
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [(c["name"], c["args"]) for c in invoked.tool_calls]
    refused = bound.invoke("Write a poem about the sea")
    assert refused.tool_calls == [] and refused.response_metadata["refusal"] is True


async def test_chat_hammer_async_calls_run_concurrently(backend: OpenAICompatibleBackend) -> None:
    import langchain_hammer
    # Estimated token counts: llama-cpp-python's /extras/tokenize waits behind running generations,
    # which would delay the second request past the first and hide the concurrency measured here.
    backend = backend.with_options(token_counting="estimate")
    bound = langchain_hammer.ChatHammer(backend=backend, max_tokens=128).bind_tools([get_weather, send_email])
    weather, email = await asyncio.gather(bound.ainvoke("What's the weather in Paris?"),
                                          bound.ainvoke("Email bob@x.com saying hi"))
    assert weather.tool_calls[0]["name"] == "get_weather" and weather.tool_calls[0]["args"]["city"] == "Paris"
    assert email.tool_calls[0]["name"] == "send_email" and email.tool_calls[0]["args"]["to"] == "bob@x.com"
    assert backend.stats.peak_in_flight == 2


async def test_hammer_llm_chat_with_tools_through_the_server(backend: OpenAICompatibleBackend) -> None:
    import llama_index.llms.hammer  # noqa: F401
    from llama_index.core.base.llms.types import ToolCallBlock
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.hammer import HammerLLM

    def weather(city: str) -> str:
        """Get the current weather for a city.

        Args:
            city (str): The city name, e.g. Paris.
        """
        return get_weather(city)

    def email(to: str, subject: str, body: str) -> str:
        """Send an email to a recipient.

        Args:
            to (str): Recipient email address.
            subject (str): Subject line.
            body (str): Text of the email.
        """
        return send_email(to, subject, body)

    llm = HammerLLM(backend=backend, max_tokens=96, parallel_tool_calls=False)
    tools = [FunctionTool.from_defaults(weather, name="get_weather"), FunctionTool.from_defaults(email, name="send_email")]

    def calls(response: Any) -> list[tuple[str, Any]]:
        return [(b.tool_name, b.tool_kwargs.get("city") or b.tool_kwargs.get("to"))
                for b in response.message.blocks if isinstance(b, ToolCallBlock)]

    assert calls(llm.chat_with_tools(tools, user_msg="What's the weather in Paris?")) == [("get_weather", "Paris")]
    response = await llm.achat_with_tools(tools, user_msg="Email bob@x.com saying hi")
    assert calls(response) == [("send_email", "bob@x.com")]
    assert llm.get_tool_calls_from_response(response)[0].tool_name == "send_email"


def test_adapters_reach_the_server_by_name(llama_server: Any) -> None:
    """The configuration a user writes: no backend object, just backend="server" and its URL."""
    from langchain_hammer import ChatHammer
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.hammer import HammerLLM
    from serverenv import API_KEY, MODEL

    llm = ChatHammer(backend="server", base_url=llama_server.base_url, model=MODEL, api_key=API_KEY, max_tokens=96)
    call = llm.bind_tools([get_weather]).invoke("What's the weather in Paris?").tool_calls[0]
    assert (call["name"], call["args"]["city"]) == ("get_weather", "Paris")
    hammer_llm = HammerLLM(backend="server", model=MODEL, max_tokens=16,
                           backend_kwargs={"base_url": llama_server.base_url, "api_key": API_KEY})
    reply = hammer_llm.chat([ChatMessage(role="user", content="Say hello.")])
    assert reply.message.content


async def test_slot_filling_runs_natively_async_on_the_server(backend: OpenAICompatibleBackend,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the engine's one pipeline a slot-filling step is native async on a server: generation
    uses no worker thread (only the CPU-bound planning, tool conversion and grammar, goes to one, so
    that a large tool set does not stall the event loop: issue 29)."""
    from hammer_plugins import HammerEngine, Message, SlotFiller

    planning = HammerEngine._prepare
    run_in_thread = asyncio.to_thread

    def only_planning(function: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(function, "__func__", None) is not planning:
            raise AssertionError(f"a worker thread was used for {function!r}")
        return run_in_thread(function, *args, **kwargs)

    # The backend's one-off setup (discovery, the grammar probe) may use a thread; generation may not.
    backend.load()
    backend.resolve_grammar_protocol()
    monkeypatch.setattr(asyncio, "to_thread", only_planning)
    tool = {"name": "pay_fine", "description": "Pay a traffic violation fine", "parameters": {"type": "object",
            "properties": {"city": {"type": "string", "description": "Violating city"},
                           "plate_number": {"type": "string", "description": "License plate number"}},
            "required": ["city", "plate_number"]}}
    filler = SlotFiller(HammerEngine(backend=backend, max_tokens=96), [tool], grounding="enforce")
    steps = await asyncio.gather(*(filler.astep([Message.user(f"Pay my traffic fine from {city}.")])
                                   for city in ("Guangzhou", "Shenzhen")))
    assert [s.snapshot.function for s in steps] == ["pay_fine", "pay_fine"]
    assert [s.snapshot.arguments.get("city") for s in steps] == ["Guangzhou", "Shenzhen"]
    assert all(s.action == "ask" for s in steps)  # the plate number was never given
