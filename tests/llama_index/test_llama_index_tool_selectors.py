"""HammerLLM with a LlamaIndex tool retriever as its tool selector (``ObjectRetrieverToolSelector``), on real objects.

No model: ``ScriptedBackend`` replays Hammer's answers and records the prompts. The retriever is LlamaIndex's
own ``ObjectIndex`` over ``FunctionTool`` s (a ``VectorStoreIndex``, as ``FunctionAgent(tool_retriever=...)``
takes one), with a tiny deterministic embedding that knows what the words miss: "Paris" and "weekend" mean a
trip. So for "What's the weather in Paris this weekend?" the retriever picks ``book_flight`` and ``find_hotel``,
while the built-in selectors pick ``get_weather`` (the only tool that shares a word with the question): a
selector left unused fails every test here.
"""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.objects import ObjectIndex, ObjectRetriever
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.tools import FunctionTool
from llama_index.llms.hammer import HammerLLM, ObjectRetrieverToolSelector

from hammer_plugins.backends.scripted import ScriptedBackend
from hammer_plugins.tools import to_tool
from hammer_plugins.tools.meaning import as_selector
from hammer_plugins.tools.selector import SelectionQuery, ToolSelector

QUESTION = "What's the weather in Paris this weekend?"
RETRIEVED = ["book_flight", "find_hotel"]  # what the retriever below returns for QUESTION, best first
BUDGET = 200  # prompt tokens: about four of these tools (the 34 take about 1,450)


class TripEmbedding(BaseEmbedding):
    """Deterministic embeddings on three axes: trip words, lodging words, and a constant (no zero vector)."""

    AXES: ClassVar[dict[str, int]] = {"paris": 0, "weekend": 0, "flight": 0, "hotel": 0, "room": 1}

    def _vector(self, text: str) -> list[float]:
        vector = [0.0, 0.0, 0.1]
        for word in re.findall(r"[a-z]+", text.lower()):
            if word in self.AXES:
                vector[self.AXES[word]] += 1.0
        return vector

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


def make_tool(name: str, description: str) -> FunctionTool:
    def run(city: str) -> str:
        return f"{name} done for {city}"

    return FunctionTool.from_defaults(run, name=name, description=description)


TOOLS = [make_tool(f"file_tool_{i}", f"Does file operation number {i} on a folder.") for i in range(30)] + [
    make_tool("get_weather", "Get the current weather for a city."),
    make_tool("book_flight", "Book a flight to an airport."),
    make_tool("find_hotel", "Find a hotel room near a landmark."),
    make_tool("send_email", "Send an email."),
]


@pytest.fixture(scope="module")
def retriever() -> ObjectRetriever[Any]:
    """An agent's tool retriever: an ObjectIndex over the tools (a vector index of their descriptions)."""
    index = ObjectIndex.from_objects(TOOLS, index_cls=VectorStoreIndex, embed_model=TripEmbedding())
    return index.as_retriever(similarity_top_k=len(RETRIEVED))


def answer(*calls: tuple[str, dict[str, Any]]) -> str:
    return json.dumps([{"name": n, "arguments": a} for n, a in calls])


def offered_in_prompt(prompt: str) -> set[str]:
    return {t.metadata.name for t in TOOLS if f'"{t.metadata.name}"' in prompt}


def scripted(selector: Any, *answers: str) -> tuple[HammerLLM, ScriptedBackend]:
    backend = ScriptedBackend(list(answers))
    return HammerLLM(backend=backend, tool_selector=selector, tool_budget=BUDGET), backend


def names(response: Any) -> list[str]:
    return [b.tool_name for b in response.message.blocks if isinstance(b, ToolCallBlock)]


def test_the_retriever_and_the_built_in_selector_disagree(retriever: ObjectRetriever[Any]) -> None:
    """The premise of every test below: the retriever's choice is not what the default would offer."""
    assert [t.metadata.name for t in retriever.retrieve(QUESTION)] == RETRIEVED
    tools = [to_tool({"name": t.metadata.name, "description": t.metadata.description}) for t in TOOLS]
    assert as_selector("bm25").select(SelectionQuery(QUESTION), tools).offered[0] == "get_weather"
    llm, _ = scripted("bm25", answer(("get_weather", {"city": "Paris"})))
    assert llm.chat_with_tools(TOOLS, user_msg=QUESTION).additional_kwargs["offered_tools"] == ["get_weather"]


def test_hammer_llm_offers_exactly_what_the_retriever_returned(retriever: ObjectRetriever[Any]) -> None:
    selector = ObjectRetrieverToolSelector(retriever)
    assert isinstance(selector, ToolSelector)
    llm, backend = scripted(selector, answer(("book_flight", {"city": "Paris"})))
    response = llm.chat_with_tools(TOOLS, user_msg=QUESTION)
    assert sorted(response.additional_kwargs["offered_tools"]) == sorted(RETRIEVED)
    assert sorted(response.raw["offered_tools"]) == sorted(RETRIEVED)
    assert offered_in_prompt(backend.prompts[-1]) == set(RETRIEVED)  # what the model saw, get_weather not among it
    assert [c.tool_name for c in llm.get_tool_calls_from_response(response)] == ["book_flight"]


async def test_the_async_and_streaming_paths_ask_the_retriever_too(retriever: ObjectRetriever[Any]) -> None:
    call = answer(("find_hotel", {"city": "Paris"}))
    llm, backend = scripted(ObjectRetrieverToolSelector(retriever), call, call)
    response = await llm.achat_with_tools(TOOLS, user_msg=QUESTION)
    assert sorted(response.additional_kwargs["offered_tools"]) == sorted(RETRIEVED)
    last = [r async for r in await llm.astream_chat_with_tools(TOOLS, user_msg=QUESTION)][-1]
    assert sorted(last.additional_kwargs["offered_tools"]) == sorted(RETRIEVED) and names(last) == ["find_hotel"]
    assert [offered_in_prompt(p) for p in backend.prompts] == [set(RETRIEVED)] * 2


def test_a_forced_tool_is_offered_beside_the_retrieved_ones(retriever: ObjectRetriever[Any]) -> None:
    llm, backend = scripted(ObjectRetrieverToolSelector(retriever), answer(("send_email", {"city": "Paris"})))
    response = llm.chat_with_tools(TOOLS, user_msg=QUESTION, tool_choice="send_email")
    assert sorted(response.additional_kwargs["offered_tools"]) == sorted([*RETRIEVED, "send_email"])
    assert offered_in_prompt(backend.prompts[-1]) == {*RETRIEVED, "send_email"}
    assert names(response) == ["send_email"]


def test_a_called_tool_stays_offered_beside_the_retrieved_ones(retriever: ObjectRetriever[Any]) -> None:
    history = [ChatMessage(role="user", content="Tidy folder 7."),
               ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="call_1", tool_name="file_tool_7",
                                                                   tool_kwargs={"city": "x"})]),
               ChatMessage(role="tool", content="done", additional_kwargs={"tool_call_id": "call_1"})]
    llm, _ = scripted(ObjectRetrieverToolSelector(retriever), answer(("find_hotel", {"city": "Paris"})))
    response = llm.chat_with_tools(TOOLS, user_msg=QUESTION, chat_history=history)
    assert sorted(response.additional_kwargs["offered_tools"]) == sorted([*RETRIEVED, "file_tool_7"])
    assert names(response) == ["find_hotel"]


@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20",
                            "ignore::pydantic.warnings.PydanticDeprecatedSince211")
async def test_a_function_agent_with_every_tool_offers_what_the_retriever_picks(retriever: ObjectRetriever[Any]) -> None:
    def responder(prompt: str) -> str:
        return "Your flight is booked." if "book_flight done for Paris" in prompt else answer(("book_flight", {"city": "Paris"}))

    backend = ScriptedBackend(responder=responder)
    agent = FunctionAgent(tools=TOOLS, llm=HammerLLM(backend=backend, tool_budget=BUDGET,
                                                     tool_selector=ObjectRetrieverToolSelector(retriever)))
    handler = agent.run(QUESTION)
    results = [e.tool_name async for e in handler.stream_events() if type(e).__name__ == "ToolCallResult"]
    assert results == ["book_flight"] and str(await handler) == "Your flight is booked."
    assert offered_in_prompt(backend.prompts[0]) == set(RETRIEVED)


class Nodes(BaseRetriever):
    """A plain retriever that returns the nodes it was given, whatever the query."""

    def __init__(self, nodes: list[TextNode]) -> None:
        super().__init__()
        self.nodes = nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=n, score=1.0) for n in self.nodes]


def test_a_plain_retrievers_nodes_name_their_tool_by_the_key_then_name_then_their_text() -> None:
    tools = [to_tool({"name": n}) for n in ("a", "b", "c")]
    nodes = [TextNode(text="x", metadata={"name": "c"}), TextNode(text=" a "), TextNode(text="x", metadata={"name": "zz"}),
             TextNode(text="y", metadata={"tool_id": "b", "name": "zz"})]
    assert ObjectRetrieverToolSelector(Nodes(nodes)).select(SelectionQuery("q"), tools).offered == ("c", "a")
    assert ObjectRetrieverToolSelector(Nodes(nodes), name_key="tool_id").select(
        SelectionQuery("q"), tools).offered == ("c", "a", "b")


def test_an_object_retriever_over_other_objects_names_them_by_name() -> None:
    """An ObjectRetriever over plain dicts or names (not tools): a dict's "name", a string as it is."""
    index = ObjectIndex.from_objects(["b", "a"], index_cls=VectorStoreIndex, embed_model=TripEmbedding())
    tools = [to_tool({"name": n}) for n in ("a", "b")]
    assert sorted(ObjectRetrieverToolSelector(index.as_retriever(similarity_top_k=2)).select(
        SelectionQuery("q"), tools).offered) == ["a", "b"]


def test_the_selector_object_reaches_the_engine_and_keys_its_sharing(retriever: ObjectRetriever[Any]) -> None:
    selector = ObjectRetrieverToolSelector(retriever)
    backend = ScriptedBackend([])
    engine = HammerLLM(backend=backend, tool_selector=selector, tool_budget=BUDGET).engine
    assert engine.tool_selector is selector
    assert HammerLLM(backend=backend, tool_selector=selector, tool_budget=BUDGET).engine is engine
    other = HammerLLM(backend=backend, tool_selector=ObjectRetrieverToolSelector(retriever), tool_budget=BUDGET).engine
    assert other is not engine and other.tool_selector is not selector
