"""LangChain 1.x agents and LangGraph's graph API on the embedded default model, through the examples.

Every tool records its own calls, so "the agent executed the expected tool" is checked where the
work happens, not in the model's text.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents.middleware import ModelCallLimitMiddleware, SummarizationMiddleware, ToolCallLimitMiddleware
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_hammer import ChatHammer
from langchain_hammer.chat_models import _openai_tool, to_engine_messages
from shared_data import load_example

from hammer_plugins.tools.demo import get_weather, send_email

# Longer than the suite's 300 s: agent examples took up to 155 s each on CI's fresh machine.
pytestmark = [pytest.mark.real_model, pytest.mark.timeout(600)]

AGENT = load_example("langchain_agent.py")


@pytest.fixture(scope="module")
def llm() -> ChatHammer:
    return AGENT.make_llm()


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """The example's tools, each recording its calls as it runs."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def recording(original: Any) -> Any:
        @tool(original.name, description=original.description, args_schema=original.args_schema)
        def run(**kwargs: Any) -> Any:
            calls.append((original.name, kwargs))
            return original.invoke(kwargs)
        return run

    monkeypatch.setattr(AGENT, "TOOLS", [recording(t) for t in AGENT.TOOLS])
    return calls


def tool_results(state: dict[str, Any]) -> dict[str, str]:
    return {str(m.name): str(m.content) for m in state["messages"] if isinstance(m, ToolMessage)}


EXPECTED_CALLS = [("calculate", {"expression": "23 * 47"}), ("days_between", {"start": "2024-01-01", "end": "2024-03-01"})]


def ran_each_once(executed: list[tuple[str, dict[str, Any]]]) -> bool:
    """Both tools ran once with the right arguments. The question asks two independent things, so
    either order is right; which comes first depends on the last bits of the logits (a warm KV
    cache from earlier tests gave days_between first in one full-suite run)."""
    return sorted(executed, key=lambda call: call[0]) == EXPECTED_CALLS


def test_create_agent_runs_the_tools_and_answers_from_them(llm: ChatHammer, executed: list[Any]) -> None:
    state = AGENT.run(llm=llm)
    assert ran_each_once(executed), executed
    final = state["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert "1081" in str(final.content) and "60" in str(final.content)


@pytest.mark.parametrize("strategy", ["provider (auto)", "tool"])
def test_create_agent_with_a_response_format_calls_tools_then_answers_in_the_schema(
        llm: ChatHammer, executed: list[Any], strategy: str) -> None:
    response_format = AGENT.Answer if strategy.startswith("provider") else ToolStrategy(AGENT.Answer)
    state = AGENT.run(llm=llm, response_format=response_format)
    assert ran_each_once(executed), executed
    results = tool_results(state)
    assert (results["calculate"], results["days_between"]) == ("1081", "60")
    assert state["structured_response"] == AGENT.Answer(product=1081, days=60)


def test_middleware_people_use_with_small_models(llm: ChatHammer, executed: list[Any]) -> None:
    # A long earlier exchange: summarization (counting with the model's own tokenizer) must fold it.
    history = [HumanMessage("Tell me about the history of arithmetic."), AIMessage("Arithmetic began ... " * 150)]
    from langchain.agents import create_agent

    agent = create_agent(llm, AGENT.TOOLS, middleware=[
        SummarizationMiddleware(llm, trigger=("tokens", 400), keep=("messages", 2),
                                token_counter=llm.get_num_tokens_from_messages),
        ToolCallLimitMiddleware(run_limit=1, exit_behavior="continue"),
        ModelCallLimitMiddleware(run_limit=3, exit_behavior="end"),
    ])
    state = agent.invoke({"messages": [*history, HumanMessage(AGENT.QUESTION)]})
    texts = [str(m.content) for m in state["messages"]]
    assert not any("Arithmetic began ... Arithmetic began" in t for t in texts)  # the old exchange was summarized
    assert len(executed) == 1  # the tool-call limit let one call run and answered the other with an error
    blocked = [m for m in state["messages"] if isinstance(m, ToolMessage) and m.status == "error"]
    assert len(blocked) == 1
    assert isinstance(state["messages"][-1], AIMessage) and not state["messages"][-1].tool_calls


def test_token_counts_are_the_models_own_counts_of_the_rendered_prompt(llm: ChatHammer) -> None:
    messages = [HumanMessage("What is 23 * 47?"), AIMessage("", tool_calls=[
        {"name": "calculate", "args": {"expression": "23 * 47"}, "id": "c1"}]),
        ToolMessage("1081", tool_call_id="c1", name="calculate")]
    engine = llm._engine()
    backend: Any = engine.backend
    tools = AGENT.TOOLS
    rendered = engine.render(to_engine_messages(messages), tools=[_openai_tool(t) for t in tools])
    assert llm.get_num_tokens_from_messages(messages, tools=tools) == len(backend.llama.tokenize(
        rendered.encode(), add_bos=False, special=True))
    assert llm.get_num_tokens_from_messages(messages) < llm.get_num_tokens_from_messages(messages, tools=tools)
    assert llm.get_num_tokens("hello world") == 2 and llm.get_token_ids("hello world") == backend.tokenize("hello world")


def test_langgraph_state_graph_with_a_tool_node_and_a_checkpointer() -> None:
    graph = load_example("langgraph_agent.py")
    messages = graph.run(llm=ChatHammer())
    results = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert results == ["1081", "2162"]  # the ToolNode ran the model's calls
    # The checkpointer kept the whole thread: both questions, both answers, in order.
    humans = [m for m in messages if isinstance(m, HumanMessage)]
    assert [h.content for h in humans] == list(graph.QUESTIONS)
    assert "2162" in str(messages[-1].content) and not messages[-1].tool_calls


def test_a_refusal_is_in_the_standard_content_and_where_langchain_keeps_refusals(llm: ChatHammer) -> None:
    message = llm.bind_tools([get_weather, send_email], on_refusal="message").invoke("Write a poem about the sea")
    assert message.tool_calls == [] and message.response_metadata["refusal"] is True
    assert message.content_blocks == [{"type": "text", "text": "Sorry, no tool is suitable for your request."}]
    assert message.additional_kwargs["refusal"] == "Sorry, no tool is suitable for your request."
