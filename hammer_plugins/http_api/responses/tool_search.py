"""The Responses API's tool search: ``{"type": "tool_search"}`` and tools marked ``defer_loading``.

OpenAI's tool search keeps deferred tools (``defer_loading: true`` on a function, or on a namespace) out of the
model's context until a search loads them; a search is either run by the server (``execution`` ``"server"``, the
default) or by the client (``"client"``: the model calls ``tool_search``, the client answers with a
``tool_search_output`` item that holds the loaded definitions). This server does both:

- **Server-executed** (the default): the server's search is the engine's tool selector, which reads the question
  and offers the fitting tools among the whole set (docs/tools.md); the deferred tools join that set, so a question
  reaches its tool with no round trip. No ``tool_search_call`` item is written (the selection is reported in
  ``hammer_offered_tools``).
- **Client-executed**: the model is offered a ``tool_search`` function (the client's description and parameters;
  by default ``{"paths": [names]}``, the names held to what can be loaded, and a description that lists each
  deferred tool's name and description), and the deferred tools stay out until a ``tool_search_output`` loads them.
  The model's search comes back as a ``tool_search_call`` item; one a response (a small model repeats its search
  with more names, so the later ones are not written).
- In the input, a search's ``tool_search_call`` and ``tool_search_output`` items are not shown to the model: the
  output's tools are loaded (offered from then on, and added to the tool set when the request's ``tools`` do not
  list them), so the model meets the question again with the tools it asked for.

Example:
    >>> search = read_tool_search([{"type": "tool_search", "execution": "client"}],
    ...                           [{"type": "tool_search_output", "execution": "client", "call_id": "c1",
    ...                             "tools": [{"type": "function", "name": "get_weather"}]}])
    >>> search.execution, sorted(search.loaded), search.hides("send_email", deferred=True)
    ('client', ['get_weather'], True)
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hammer_plugins.http_api.errors import APIError

TOOL_SEARCH = "tool_search"
"""The name a client-executed search is offered to the model under (OpenAI's own)."""

DEFAULT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"paths": {"type": "array", "items": {"type": "string"},
                             "description": "Names of the tools to load (a namespace's name loads all its tools)."}},
    "required": ["paths"]}
"""A client search's parameters when the client gives none: the tools to load by name, as the OpenAI Agents SDK's
built-in client schema has them."""

MAX_NAMED = 4000
"""Characters of deferred tools' names and descriptions a client search's default description lists; a longer
catalog is cut, and the default parameters then take any name (the prompt stays bounded whatever the tool count)."""


@dataclass
class ToolSearch:
    """What a Responses request says of tool search: how it runs, and what its earlier searches loaded.

    ``execution``: ``None`` (no ``tool_search`` tool), ``"server"`` or ``"client"``; ``loaded``: tool and namespace
    names a ``tool_search_output`` of the input loaded; ``definitions``: the definitions those outputs carried.
    """

    execution: str | None = None
    description: str | None = None
    parameters: Mapping[str, Any] | None = None
    loaded: set[str] = field(default_factory=set)
    definitions: list[Mapping[str, Any]] = field(default_factory=list)

    def hides(self, name: str, *, deferred: bool, namespace: str | None = None) -> bool:
        """Whether a tool stays out of the model's offer: a deferred one under a client search, until loaded."""
        return self.execution == "client" and deferred and name not in self.loaded and namespace not in self.loaded

    def unlisted(self, tools: Sequence[Mapping[str, Any]], separator: str) -> list[Mapping[str, Any]]:
        """The loaded definitions whose tools are not among ``tools`` (function tools in Chat Completions' shape; a
        namespace's as ``ns<separator>name``)."""
        if not self.definitions:
            return []
        listed = {t["function"]["name"] for t in tools}
        found: dict[str, Mapping[str, Any]] = {}  # by name: a definition loaded twice is added once
        for definition in self.definitions:
            names = {definition["name"]} if definition.get("type") != "namespace" else {
                f"{definition['name']}{separator}{t.get('name')}" for t in definition.get("tools") or ()
                if isinstance(t, Mapping)}
            if not names <= listed:
                found.setdefault(definition["name"], definition)
        return list(found.values())

    def function(self, deferred: Sequence[tuple[str, str]], listed: Collection[str] = ()) -> dict[str, Any]:
        """The client search as the function the model is offered (Chat Completions' shape); ``deferred``: the name
        and description of each tool it can load, which the default description lists (as OpenAI shows the model
        the names and descriptions of deferred functions); ``listed``: the names of the functions beside it."""
        _require(TOOL_SEARCH not in listed, f"a function named {TOOL_SEARCH!r} is sent beside a tool_search tool. "
                                            "Fix: rename the function, or drop one of the two.", "tools")
        catalog = "; ".join(f"{name} ({text.strip()})" if text.strip() else name for name, text in deferred)
        whole = len(catalog) <= MAX_NAMED  # a longer catalog is cut, and its names are not held to a list either:
        # the tools block would otherwise grow with every deferred tool, which deferring them is meant to avoid
        description = self.description
        if description is None:
            shown = catalog if whole else catalog[:MAX_NAMED].rsplit("; ", 1)[0] + "; ..."
            description = ("Load the tools that this request needs before calling them: give only their names. "
                           f"Tools that can be loaded: {shown or 'none'}.")
        names = [name for name, _ in deferred] if whole else []
        parameters = dict(self.parameters) if self.parameters is not None else _default_parameters(names)
        return {"type": "function", "function": {"name": TOOL_SEARCH, "description": description,
                                                 "parameters": parameters}}


def _default_parameters(names: Sequence[str]) -> dict[str, Any]:
    """:data:`DEFAULT_PARAMETERS`, its names held to the tools that can be loaded (constrained decoding then writes no
    other: the stand-in model otherwise added the question's words, "Paris", as paths)."""
    if not names:
        return DEFAULT_PARAMETERS
    paths = {**DEFAULT_PARAMETERS["properties"]["paths"], "items": {"type": "string", "enum": list(dict.fromkeys(names))}}
    return {**DEFAULT_PARAMETERS, "properties": {"paths": paths}}


def _require(condition: bool, message: str, param: str) -> None:
    if not condition:
        raise APIError(400, message, param=param, code="invalid_value")


def read_tool_search(tools: Any, items: Any) -> ToolSearch:
    """The request's tool search: its ``tool_search`` tool (at most one) and what the input's searches loaded."""
    search = ToolSearch()
    for i, tool in enumerate(tools if isinstance(tools, list) else []):
        if not (isinstance(tool, Mapping) and tool.get("type") == TOOL_SEARCH):
            continue
        _require(search.execution is None, f"tools[{i}] is a second tool_search tool; send one.", f"tools[{i}]")
        execution = tool.get("execution") or "server"
        _require(execution in ("server", "client"), f"tools[{i}].execution must be 'server' or 'client'.",
                 f"tools[{i}].execution")
        _require(tool.get("description") is None or isinstance(tool["description"], str),
                 f"tools[{i}].description must be a string.", f"tools[{i}].description")
        _require(tool.get("parameters") is None or isinstance(tool["parameters"], Mapping),
                 f"tools[{i}].parameters must be a JSON schema object.", f"tools[{i}].parameters")
        search.execution, search.description, search.parameters = execution, tool.get("description"), tool.get("parameters")
    for i, item in enumerate(items if isinstance(items, list) else []):
        if not (isinstance(item, Mapping) and item.get("type") == "tool_search_output"):
            continue
        loaded = item.get("tools")
        _require(isinstance(loaded, list), f"input[{i}].tools must be a list of tools.", f"input[{i}].tools")
        for j, tool in enumerate(loaded):
            _require(isinstance(tool, Mapping) and isinstance(tool.get("name"), str) and bool(tool["name"]),
                     f"input[{i}].tools[{j}] must be a tool with a name.", f"input[{i}].tools[{j}]")
            search.loaded.add(tool["name"])
            search.definitions.append(tool)
    return search

