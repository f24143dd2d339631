"""LlamaIndex tool retrievers as Hammer's tool selector: which of a large tool set a call offers.

When the tools block of a call passes ``tool_budget`` (prompt tokens), the engine offers the tools its
selector chooses (the always-offered tools aside: a forced ``tool_choice``, the tools the conversation called,
the caller's pins). :class:`ObjectRetrieverToolSelector` makes the tool retriever of a LlamaIndex agent
(``ObjectIndex.from_objects(tools).as_retriever()``, what ``FunctionAgent(tool_retriever=...)`` takes) that
selector, or any ``BaseRetriever`` whose nodes name a tool in their metadata.

Example:
    >>> from llama_index.core import SimpleKeywordTableIndex
    >>> from llama_index.core.llms import MockLLM
    >>> from llama_index.core.objects import ObjectIndex
    >>> from llama_index.core.tools import FunctionTool
    >>> from llama_index.llms.hammer import HammerLLM, ObjectRetrieverToolSelector
    >>> def get_weather(city: str) -> str:
    ...     '''Get the current weather for a city.'''
    ...     return "sunny"
    >>> def send_email(to: str, body: str) -> str:
    ...     '''Send an email to someone.'''
    ...     return "sent"
    >>> tools = [FunctionTool.from_defaults(get_weather), FunctionTool.from_defaults(send_email)]
    >>> index = ObjectIndex.from_objects(tools, index_cls=SimpleKeywordTableIndex, llm=MockLLM())  # keywords: no model
    >>> selector = ObjectRetrieverToolSelector(index.as_retriever())
    >>> llm = HammerLLM(tool_selector=selector, tool_budget=256)   # nothing loads until the first call
    >>> from hammer_plugins.tools import to_tool
    >>> from hammer_plugins.tools.selector import SelectionQuery
    >>> selector.select(SelectionQuery("Send an email to Ann"), [to_tool({"name": t.metadata.name}) for t in tools])
    Selection(offered=('send_email',), reserve=(), needed=())
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.objects import ObjectRetriever
from llama_index.core.schema import BaseNode, NodeWithScore

from hammer_plugins.tools.definition import Tool
from hammer_plugins.tools.selector import FunctionSelector


class ObjectRetrieverToolSelector(FunctionSelector):
    """A LlamaIndex tool retriever as a Hammer tool selector (``ToolSelector``).

    ``select(query, tools)`` calls ``retriever.retrieve(question text)`` and offers the tools it returns, in its
    order, best first; a name that is not among the call's tools is skipped (the retriever may index more tools
    than a call is given). An empty answer leaves the choice to the tool set's order. What it returns names its
    tool as follows: a tool by ``tool.metadata.name`` (an ``ObjectRetriever`` over tools), a node (or
    ``NodeWithScore``) by ``node.metadata[name_key]``, else ``node.metadata["name"]``, else its text, and
    anything else as a tool name, an object with ``.name``, or a dict with ``"name"``.

    Args:
        retriever: an ``ObjectRetriever`` (``ObjectIndex.as_retriever(similarity_top_k=5)``, the
            ``tool_retriever`` of LlamaIndex agents) or a ``BaseRetriever``; how many tools it returns is its
            own setting, and the engine then keeps what fits ``tool_budget``.
        name_key: the node metadata key that holds the tool name (default ``"name"``, as ``ObjectIndex`` writes;
            ``"name"`` is read too when ``name_key`` is another key).

    Pass it as ``HammerLLM(tool_selector=ObjectRetrieverToolSelector(retriever), tool_budget=...)``.

    Example:
        >>> from llama_index.core.retrievers import BaseRetriever
        >>> from llama_index.core.schema import NodeWithScore, TextNode
        >>> class Fixed(BaseRetriever):                   # a retriever that returns the same nodes
        ...     def _retrieve(self, query_bundle):
        ...         return [NodeWithScore(node=TextNode(text="x", metadata={"name": n}), score=1.0)
        ...                 for n in ("send_email", "not_given_to_this_call", "get_weather")]
        >>> from hammer_plugins.tools import to_tool
        >>> from hammer_plugins.tools.selector import SelectionQuery
        >>> tools = [to_tool({"name": n}) for n in ("get_weather", "send_email")]
        >>> ObjectRetrieverToolSelector(Fixed()).select(SelectionQuery("anything"), tools)
        Selection(offered=('send_email', 'get_weather'), reserve=(), needed=())
    """

    def __init__(self, retriever: ObjectRetriever[Any] | BaseRetriever, *, name_key: str = "name") -> None:
        super().__init__(self._names)
        self.retriever = retriever
        self.name_key = name_key

    def _names(self, text: str, tools: Sequence[Tool]) -> list[Any]:
        return [self.tool_name(found) for found in self.retriever.retrieve(text)]

    def tool_name(self, found: Any) -> Any:
        """The tool one retrieved item names (see the class); what it cannot read is returned as it is."""
        if isinstance(found, NodeWithScore):
            found = found.node
        if isinstance(found, BaseNode):
            keyed = (found.metadata.get(key) for key in (self.name_key, "name"))
            return next((name for name in keyed if isinstance(name, str)), None) or found.get_content().strip()
        metadata = getattr(found, "metadata", None)  # a LlamaIndex tool: its ToolMetadata
        return metadata.name if isinstance(getattr(metadata, "name", None), str) else found
