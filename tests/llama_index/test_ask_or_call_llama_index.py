"""HammerLLM and the ask-or-call rule (scripted backend): a message asking, the held-back call in
``additional_kwargs``; the history sent back completes the call."""

from __future__ import annotations

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.tools import FunctionTool
from llama_index.llms.hammer import HammerLLM

from hammer_plugins.backends.scripted import ScriptedBackend


def pay_fine(city: str, plate: str) -> str:
    """Pay a traffic fine.

    Args:
        city: Violating city
        plate: License plate number
    """
    return "paid"


INVENTED = '[{"name": "pay_fine", "arguments": {"city": "Guangzhou", "plate": "ABC123"}}]'
COMPLETED = '[{"name": "pay_fine", "arguments": {"plate": "D456"}}]'


def test_hammer_llm_asks_and_the_next_turn_completes_the_call() -> None:
    llm = HammerLLM(backend=ScriptedBackend([INVENTED, COMPLETED]), on_missing="ask")
    tool = FunctionTool.from_defaults(pay_fine)
    history = [ChatMessage(role="user", content="Pay my traffic fine in Guangzhou")]
    asked = llm.chat_with_tools([tool], chat_history=history)
    assert llm.get_tool_calls_from_response(asked, error_on_no_tool_call=False) == []
    assert asked.message.content == "Please provide the plate."  # FunctionTool keeps no Args descriptions
    [pending] = asked.message.additional_kwargs["hammer_pending_calls"]
    assert pending["arguments"] == {"city": "Guangzhou"} and pending["missing"] == ["plate"]
    done = llm.chat_with_tools([tool], chat_history=[*history, asked.message,
                                                     ChatMessage(role="user", content="D456")])
    [call] = llm.get_tool_calls_from_response(done)
    assert (call.tool_name, call.tool_kwargs, call.tool_id) == ("pay_fine", {"city": "Guangzhou", "plate": "D456"},
                                                                pending["id"])
