"""LangChain retrievers as Hammer's tool selector: which of a large tool set a call offers.

When the tools block of a call passes ``tool_budget`` (prompt tokens), the engine offers the tools its
selector chooses (the always-offered tools aside: a forced ``tool_choice``, the tools the conversation called,
the caller's pins). :class:`RetrieverToolSelector` makes any LangChain ``BaseRetriever`` that selector, such
as a vector store's retriever over your tools' descriptions, the way ``langgraph-bigtool`` indexes tools:
one ``Document`` per tool, its name in the metadata.

A ``retrieve_tools_function`` as ``langgraph-bigtool`` takes one (query text in, tool names or ids out) needs
no adapter: pass ``tool_selector=lambda text, tools: retrieve_tools(text)`` (a function of the question text
and the tools is a selector already, :class:`hammer_plugins.tools.selector.FunctionSelector`).

Example:
    >>> from langchain_core.documents import Document
    >>> from langchain_core.embeddings import DeterministicFakeEmbedding
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> from langchain_hammer import ChatHammer, RetrieverToolSelector
    >>> store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    >>> _ = store.add_documents([Document("get_weather: the weather in a city", metadata={"tool_name": "get_weather"}),
    ...                          Document("send_email: send an email", metadata={"tool_name": "send_email"})])
    >>> selector = RetrieverToolSelector(store.as_retriever(search_kwargs={"k": 1}))
    >>> llm = ChatHammer(tool_selector=selector, tool_budget=256)   # nothing loads until the first call
    >>> from hammer_plugins.tools import to_tool
    >>> from hammer_plugins.tools.selector import SelectionQuery
    >>> tools = [to_tool({"name": n}) for n in ("get_weather", "send_email")]
    >>> selector.select(SelectionQuery("send_email: send an email"), tools)   # the retriever's best match
    Selection(offered=('send_email',), reserve=(), needed=())
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig

from hammer_plugins.tools.definition import Tool
from hammer_plugins.tools.selector import FunctionSelector


class RetrieverToolSelector(FunctionSelector):
    """A LangChain ``BaseRetriever`` over tool descriptions as a Hammer tool selector (``ToolSelector``).

    ``select(query, tools)`` invokes the retriever with the question text and offers the tools it returns, in
    its order, best first; a name that is not among the call's tools is skipped (the retriever may index more
    tools than a call is given). An empty answer leaves the choice to the tool set's order. Each ``Document``
    names its tool by ``metadata[name_key]``, else ``metadata["name"]``, else its ``page_content``.

    Args:
        retriever: any ``BaseRetriever`` (``vector_store.as_retriever(search_kwargs={"k": 5})``, BM25, an
            ensemble); how many tools it returns is its own setting (``k``), and the engine then keeps what fits
            ``tool_budget``.
        name_key: the metadata key that holds the tool name (default ``"tool_name"``).
        config: a ``RunnableConfig`` for the retriever's runs (callbacks, tags), as ``retriever.invoke`` takes it.

    Pass it as ``ChatHammer(tool_selector=RetrieverToolSelector(retriever), tool_budget=...)``.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.retrievers import BaseRetriever
        >>> class ByWord(BaseRetriever):                  # a retriever that returns documents sharing a word
        ...     docs: list[Document]
        ...     def _get_relevant_documents(self, query, *, run_manager):
        ...         return [d for d in self.docs if set(query.lower().split()) & set(d.page_content.split())]
        >>> retriever = ByWord(docs=[Document("rain umbrella forecast", metadata={"tool_name": "get_weather"}),
        ...                          Document("mail letter", metadata={"name": "send_email"}),
        ...                          Document("rain gauge", metadata={"tool_name": "not_given_to_this_call"})])
        >>> from hammer_plugins.tools import to_tool
        >>> from hammer_plugins.tools.selector import SelectionQuery
        >>> tools = [to_tool({"name": n}) for n in ("send_email", "get_weather")]
        >>> RetrieverToolSelector(retriever).select(SelectionQuery("Rain tomorrow? Then mail Ann"), tools)
        Selection(offered=('get_weather', 'send_email'), reserve=(), needed=())
    """

    def __init__(self, retriever: BaseRetriever, *, name_key: str = "tool_name",
                 config: RunnableConfig | None = None) -> None:
        super().__init__(self._retrieve)
        self.retriever = retriever
        self.name_key = name_key
        self.config = config

    def _retrieve(self, text: str, tools: Sequence[Tool]) -> list[str]:
        return [self.tool_name(document) for document in self.retriever.invoke(text, self.config)]

    def tool_name(self, document: Document) -> str:
        """The tool a retrieved ``Document`` names: ``metadata[name_key]``, ``metadata["name"]``, or its text."""
        metadata: dict[str, Any] = document.metadata or {}
        for key in (self.name_key, "name"):
            if isinstance(metadata.get(key), str):
                return metadata[key]
        return document.page_content.strip()
