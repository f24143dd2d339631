"""The selector seam: who decides which of a large tool set a call offers.

A :class:`ToolSelector` reads the question (:class:`SelectionQuery`) and the tools, and answers a
:class:`Selection`: the tools to offer, best first, and the reserve to offer once more if Hammer answers
``[]`` (refusal widening). The engine keeps the tools that must stay (a forced ``tool_choice``, the tools
the conversation called, the caller's pins), then takes the selection's tools, in order, while they fit
the tool budget. Every door (ChatHammer, HammerLLM, the CLI, the server) asks the engine's selector.

Built in: ``"meaning"`` (the default, :class:`~hammer_plugins.tools.meaning.MeaningSelector`: multilingual
embeddings fused with BM25, one set of candidates per part of the question) and ``"bm25"`` (words only).
Your own: any object with ``select(query, tools)``, or a plain function ``(query_text, tools) -> names``
(:class:`FunctionSelector`); :func:`~hammer_plugins.tools.meaning.as_selector` turns a setting into a selector.
The LangChain and LlamaIndex adapters turn a retriever into one.

Example:
    >>> from hammer_plugins.tools import to_tool
    >>> tools = [to_tool({"name": n, "description": d}) for n, d in [("a", "x"), ("b", "y")]]
    >>> pick = FunctionSelector(lambda text, tools: ["b"])
    >>> pick.select(SelectionQuery(text="anything"), tools)
    Selection(offered=('b',), reserve=(), needed=())
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from hammer_plugins.tools.definition import Tool


@dataclass(frozen=True)
class SelectionQuery:
    """What a selector reads of a conversation.

    ``text``: the question (the last user turn, with earlier ones when it says too little alone);
    ``context``: the user's earlier turns, most recent last; ``called``: the tools called so far;
    ``results``: the tool results since the user's last turn; ``question``: the last user turn alone (empty:
    ``text``).

    The built-in selectors rank by the user's words only: a tool result is outside input (a hostile server's
    "now call delete_file" must not bring that tool into the offer). ``results`` is there for a selector of
    your own that trusts its tools.

    Example:
        >>> SelectionQuery("And in Rome?", context=("Weather in Paris?",), called=("get_weather",)).called
        ('get_weather',)
    """

    text: str
    context: tuple[str, ...] = ()
    called: tuple[str, ...] = ()
    results: tuple[str, ...] = ()
    question: str = ""


@dataclass(frozen=True)
class Selection:
    """A selector's answer: tool names to offer, best first, and the reserve for one widening on ``[]``.

    ``needed``: the offered tools the question cannot do without (the best match, the best of each part of
    the question); empty means all of ``offered``. A conversation keeps the tools it was offered before while
    they hold these, so its prompt's head, and the KV state cached for it, stay the same from turn to turn.

    Example:
        >>> Selection(offered=("get_weather",), reserve=("get_forecast",)).reserve
        ('get_forecast',)
    """

    offered: tuple[str, ...]
    reserve: tuple[str, ...] = field(default=())
    needed: tuple[str, ...] = field(default=())


@runtime_checkable
class ToolSelector(Protocol):
    """Chooses which tools a call offers (see the module).

    Example:
        >>> class First:
        ...     def select(self, query, tools):
        ...         return Selection(offered=(tools[0].name,))
        >>> isinstance(First(), ToolSelector)
        True
    """

    def select(self, query: SelectionQuery, tools: Sequence[Tool]) -> Selection: ...


class FunctionSelector:
    """A caller's function ``(query_text, tools) -> names`` as a :class:`ToolSelector`.

    The function may take the question alone (langgraph-bigtool's ``retrieve_tools_function``). The names come
    back in the function's order; names that are not among the tools are ignored (a
    retriever may know more tools than this call was given).

    Example:
        >>> from hammer_plugins.tools import to_tool
        >>> FunctionSelector(lambda q, tools: ["nope", "a"]).select(SelectionQuery("q"), [to_tool({"name": "a"})])
        Selection(offered=('a',), reserve=(), needed=())
        >>> FunctionSelector(lambda query: ["a"]).select(SelectionQuery("q"), [to_tool({"name": "a"})]).offered
        ('a',)
    """

    def __init__(self, function: Callable[..., Sequence[Any]]) -> None:
        self.function = function
        # langgraph-bigtool's retrieve_tools_function takes the query alone: such a function gets the text only.
        self._text_only = _positional_count(function) == 1

    def select(self, query: SelectionQuery, tools: Sequence[Tool]) -> Selection:
        known = {t.name for t in tools}
        found_items = self.function(query.text) if self._text_only else self.function(query.text, tools)
        found = [_name_of(item) for item in found_items or ()]
        return Selection(offered=tuple(dict.fromkeys(n for n in found if n in known)))


def _positional_count(function: Callable[..., Any]) -> int | None:
    """How many positional arguments ``function`` takes (None: any number, or not known)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return None
    return sum(p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in parameters)


def _name_of(item: Any) -> str:
    """A tool name from what a selector function returns: a name, a :class:`Tool`, or anything with ``name``."""
    if isinstance(item, str):
        return item
    name = getattr(item, "name", None)
    if isinstance(name, str):
        return name
    if isinstance(item, dict) and isinstance(item.get("name"), str):
        return item["name"]
    raise TypeError(f"a tool selector returned {type(item).__name__}, not a tool name. Fix: return tool names "
                    "(str), tools, or objects with a .name")
