"""ChatHammer and the ask-or-call rule (scripted backend): an AIMessage asking, the held-back call in its metadata;
the history sent back completes the call, in invoke and in stream."""

from __future__ import annotations

from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_hammer import ChatHammer

from hammer_plugins.backends.scripted import ScriptedBackend

PAY_FINE = {"type": "function", "function": {"name": "pay_fine", "description": "Pay a traffic fine", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "description": "Violating city"},
                                     "plate": {"type": "string", "description": "License plate number"}},
    "required": ["city", "plate"]}}}
INVENTED = '[{"name": "pay_fine", "arguments": {"city": "Guangzhou", "plate": "ABC123"}}]'
COMPLETED = '[{"name": "pay_fine", "arguments": {"plate": "D456"}}]'


def test_chat_hammer_asks_and_the_next_turn_completes_the_call() -> None:
    llm = ChatHammer(backend=ScriptedBackend([INVENTED, COMPLETED]), on_missing="ask").bind_tools([PAY_FINE])
    history = [HumanMessage("Pay my traffic fine in Guangzhou")]
    asked = llm.invoke(history)
    assert isinstance(asked, AIMessage) and asked.tool_calls == []
    assert asked.content == "Please provide the license plate number."
    [pending] = asked.response_metadata["hammer_pending_calls"]
    assert pending["arguments"] == {"city": "Guangzhou"} and pending["missing"] == ["plate"]
    assert asked.additional_kwargs["hammer_pending_calls"] == [pending]
    done = llm.invoke([*history, asked, HumanMessage("D456")])
    assert [(c["name"], c["args"], c["id"]) for c in done.tool_calls] == [
        ("pay_fine", {"city": "Guangzhou", "plate": "D456"}, pending["id"])]


def test_the_option_is_a_call_argument_too_and_streaming_asks_the_same() -> None:
    llm = ChatHammer(backend=ScriptedBackend([INVENTED])).bind_tools([PAY_FINE], on_missing="ask")
    chunks = list(llm.stream([HumanMessage("Pay my traffic fine in Guangzhou")]))
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged = merged + chunk
    assert isinstance(merged, AIMessageChunk) and merged.tool_call_chunks == []
    assert merged.content == "Please provide the license plate number."
    assert merged.response_metadata["hammer_pending_calls"][0]["missing"] == ["plate"]
