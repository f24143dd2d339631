"""ChatHammer with a LangChain retriever as its tool selector (``RetrieverToolSelector``), on real LangChain objects.

No model: ``ScriptedBackend`` replays Hammer's answers and records the prompts. The retriever is LangChain's own
``InMemoryVectorStore`` over one ``Document`` per tool (as langgraph-bigtool indexes tools), with a tiny
deterministic embedding that knows what the words miss: "Paris" and "weekend" mean a trip. So for "What's the
weather in Paris this weekend?" the retriever picks ``book_flight`` and ``find_hotel``, while the built-in
selectors pick ``get_weather`` (the only tool that shares a word with the question): a selector left unused fails
every test here.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_hammer import ChatHammer, RetrieverToolSelector

from hammer_plugins.backends.scripted import ScriptedBackend
from hammer_plugins.tools import to_tool
from hammer_plugins.tools.meaning import as_selector
from hammer_plugins.tools.selector import SelectionQuery, ToolSelector

QUESTION = "What's the weather in Paris this weekend?"
RETRIEVED = ["book_flight", "find_hotel"]  # what the retriever below returns for QUESTION, best first
BUDGET = 200  # prompt tokens: about four of these tools (the 34 take about 1,450)


class TripEmbeddings(Embeddings):
    """Deterministic embeddings on three axes: trip words, lodging words, and a constant (no zero vector)."""

    AXES = {"paris": 0, "weekend": 0, "flight": 0, "hotel": 0, "room": 1}

    def _vector(self, text: str) -> list[float]:
        vector = [0.0, 0.0, 0.1]
        for word in re.findall(r"[a-z]+", text.lower()):
            if word in self.AXES:
                vector[self.AXES[word]] += 1.0
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def make_tool(name: str, description: str) -> BaseTool:
    def run(city: str) -> str:
        return f"{name}({city})"

    return StructuredTool.from_function(run, name=name, description=description)


TOOLS = [make_tool(f"file_tool_{i}", f"Does file operation number {i} on a folder.") for i in range(30)] + [
    make_tool("get_weather", "Get the current weather for a city."),
    make_tool("book_flight", "Book a flight to an airport."),
    make_tool("find_hotel", "Find a hotel room near a landmark."),
    make_tool("send_email", "Send an email."),
]


@pytest.fixture(scope="module")
def retriever() -> BaseRetriever:
    """A vector store over the tools' descriptions, langgraph-bigtool style: the tool's name in the metadata."""
    store = InMemoryVectorStore(TripEmbeddings())
    store.add_documents([Document(f"{t.name}: {t.description}", metadata={"tool_name": t.name}) for t in TOOLS])
    return store.as_retriever(search_kwargs={"k": len(RETRIEVED)})


def answer(*calls: dict[str, Any]) -> str:
    return "```\n" + json.dumps(list(calls)) + "\n```"


def offered_in_prompt(prompt: str) -> set[str]:
    return {t.name for t in TOOLS if f'"{t.name}"' in prompt}


def chat(selector: Any, *answers: str) -> tuple[ChatHammer, ScriptedBackend]:
    backend = ScriptedBackend(list(answers))
    return ChatHammer(backend=backend, tool_selector=selector, tool_budget=BUDGET), backend


def test_the_retriever_and_the_built_in_selector_disagree(retriever: BaseRetriever) -> None:
    """The premise of every test below: the retriever's choice is not what the default would offer."""
    assert [d.metadata["tool_name"] for d in retriever.invoke(QUESTION)] == RETRIEVED
    tools = [to_tool({"name": t.name, "description": t.description}) for t in TOOLS]
    assert as_selector("bm25").select(SelectionQuery(QUESTION), tools).offered[0] == "get_weather"
    llm, backend = chat("bm25", answer({"name": "get_weather", "arguments": {"city": "Paris"}}))
    assert llm.bind_tools(TOOLS).invoke(QUESTION).response_metadata["offered_tools"] == ["get_weather"]


def test_chat_hammer_offers_exactly_what_the_retriever_returned(retriever: BaseRetriever) -> None:
    selector = RetrieverToolSelector(retriever)
    assert isinstance(selector, ToolSelector)
    llm, backend = chat(selector, answer({"name": "book_flight", "arguments": {"city": "Paris"}}))
    message = llm.bind_tools(TOOLS).invoke(QUESTION)
    assert sorted(message.response_metadata["offered_tools"]) == sorted(RETRIEVED)
    assert offered_in_prompt(backend.prompts[-1]) == set(RETRIEVED)  # what the model saw, get_weather not among it
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [("book_flight", {"city": "Paris"})]


async def test_the_async_and_streaming_paths_ask_the_retriever_too(retriever: BaseRetriever) -> None:
    call = answer({"name": "find_hotel", "arguments": {"city": "Paris"}})
    llm, backend = chat(RetrieverToolSelector(retriever), call, call)
    message = await llm.bind_tools(TOOLS).ainvoke(QUESTION)
    assert sorted(message.response_metadata["offered_tools"]) == sorted(RETRIEVED)
    chunks = [c async for c in llm.bind_tools(TOOLS).astream(QUESTION)]
    assert sorted(sum(chunks[1:], chunks[0]).response_metadata["offered_tools"]) == sorted(RETRIEVED)
    assert [offered_in_prompt(p) for p in backend.prompts] == [set(RETRIEVED)] * 2


def test_a_forced_tool_is_offered_beside_the_retrieved_ones(retriever: BaseRetriever) -> None:
    llm, backend = chat(RetrieverToolSelector(retriever), answer({"name": "send_email", "arguments": {"city": "Paris"}}))
    message = llm.bind_tools(TOOLS, tool_choice="send_email").invoke(QUESTION)
    assert sorted(message.response_metadata["offered_tools"]) == sorted([*RETRIEVED, "send_email"])
    assert offered_in_prompt(backend.prompts[-1]) == {*RETRIEVED, "send_email"}
    assert [c["name"] for c in message.tool_calls] == ["send_email"]


def test_a_called_tool_stays_offered_beside_the_retrieved_ones(retriever: BaseRetriever) -> None:
    history = [HumanMessage("Tidy folder 7."),
               AIMessage("", tool_calls=[{"name": "file_tool_7", "args": {"city": "x"}, "id": "call_1"}]),
               ToolMessage("done", tool_call_id="call_1"), HumanMessage(QUESTION)]
    llm, backend = chat(RetrieverToolSelector(retriever), answer({"name": "find_hotel", "arguments": {"city": "Paris"}}))
    message = llm.bind_tools(TOOLS).invoke(history)
    assert sorted(message.response_metadata["offered_tools"]) == sorted([*RETRIEVED, "file_tool_7"])
    assert [c["name"] for c in message.tool_calls] == ["find_hotel"]


class Listed(BaseRetriever):
    """A retriever that returns the documents it was given, whatever the query."""

    documents: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return self.documents


def test_a_document_names_its_tool_by_the_key_then_name_then_its_text() -> None:
    tools = [to_tool({"name": n}) for n in ("a", "b", "c", "d")]
    documents = [Document("ignored", metadata={"tool_name": "c"}), Document("ignored", metadata={"name": "a"}),
                 Document(" d "), Document("x", metadata={"tool_name": "not_given"}), Document("a")]
    assert RetrieverToolSelector(Listed(documents=documents)).select(SelectionQuery("q"), tools).offered == ("c", "a", "d")
    keyed = [Document("x", metadata={"id_of_tool": "b", "tool_name": "c"})]
    assert RetrieverToolSelector(Listed(documents=keyed), name_key="id_of_tool").select(
        SelectionQuery("q"), tools).offered == ("b",)


def test_a_bigtool_style_function_is_a_selector_too() -> None:
    """langgraph-bigtool's ``retrieve_tools_function`` (query -> tool ids) needs only a lambda to drop ``tools``."""
    asked: list[str] = []

    def retrieve_tools(query: str) -> list[str]:
        asked.append(query)
        return ["find_hotel", "unknown_tool"]

    llm, backend = chat(lambda text, tools: retrieve_tools(text), answer())
    message = llm.bind_tools(TOOLS).invoke(QUESTION)
    assert message.response_metadata["offered_tools"] == ["find_hotel"] and asked == [QUESTION]


def test_the_selector_object_reaches_the_engine_and_keys_its_sharing(retriever: BaseRetriever) -> None:
    selector = RetrieverToolSelector(retriever)
    backend = ScriptedBackend([])
    first = ChatHammer(backend=backend, tool_selector=selector, tool_budget=BUDGET)
    engine = first._engine()
    assert engine.tool_selector is selector
    assert ChatHammer(backend=backend, tool_selector=selector, tool_budget=BUDGET)._engine() is engine
    other = ChatHammer(backend=backend, tool_selector=RetrieverToolSelector(retriever), tool_budget=BUDGET)._engine()
    assert other is not engine and other.tool_selector is not selector
    assert first._identifying_params["tool_selector"] is selector
    assert "RetrieverToolSelector" in first._get_llm_string()  # LangChain's cache key is built from it
