"""The Hammer paper's academic test sets: API-Bank L-1 and L-2, Tool-Alpaca, Seal-Tools.

Each entry is ``{"query", "tools", "answers"}`` (MadeAgents/Hammer ``data/test/original``). How they
become the engine's inputs, faithfully:

* **tools** arrive in Hammer's flattened layout: ``parameters`` maps each name to ``{"type",
  "description", "required"?, ...}``, required either per parameter (``"required": true``) or as a
  top-level list. They become a JSON Schema object with those properties in the order given,
  ``required`` from either form, and every other key kept. Python type names stay as written
  (``str``, ``int``, ``float``, ``bool``, ``list``, ``dict``: the engine reads them as their JSON
  Schema types and shows them as written); ``list(str)`` becomes an array of strings. A tool's
  ``return`` and ``desc_for_search`` describe its output, not its call, and are left out.
* **query**: a string is one user message; a dialogue (API-Bank) keeps its turns, ``user`` as user,
  ``agent`` and ``assistant`` as assistant, ``tool`` as tool results, so the last agent turn
  ("... Generate API Request:") is in the conversation and the model answers after it.
* **answers**: ``{"name", "arguments"}`` or ``{"tool", "parameters"}`` become ``{"name", "arguments"}``.

Example:
    >>> tool = {"name": "GetWeather", "description": "Weather for a city", "parameters": {
    ...     "city": {"type": "str", "description": "The city"}, "days": {"type": "list(str)", "description": "Days"}},
    ...     "required": ["city"], "return": {"weather": {"type": "str"}}}
    >>> schema = convert_tool(tool)["parameters"]
    >>> schema["required"], schema["properties"]["days"]["type"], schema["properties"]["days"]["items"]
    (['city'], 'array', {'type': 'string'})
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from hammer_plugins.values.messages import Message

from ..datasets import find_json, read_json

SETS: dict[str, str] = {
    "apibank_l1": "API-Bank L-1", "apibank_l2": "API-Bank L-2", "toolalpaca": "Tool-Alpaca", "sealtool": "Seal-Tools",
}
"""File stem to the name the paper's Table 3 gives the set, in the table's order."""

_ROLES = {"user": "user", "agent": "assistant", "assistant": "assistant", "tool": "tool", "system": "system"}
_LIST_OF = re.compile(r"^(?:list|List)\s*[\[(]\s*(\w+)\s*[\])]$")
_ITEM_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "dict": "object"}


class AcademicEntry(BaseModel):
    """One test question: the conversation, the tools offered (converted), and the gold calls.

    Example:
        >>> entry = AcademicEntry(set="sealtool", index=0, messages=[Message.user("hi")], tools=[], gold=[])
        >>> entry.key
        'sealtool/0'
    """

    set: str
    index: int
    messages: list[Message]
    tools: list[dict[str, Any]]
    gold: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.set}/{self.index}"


def convert_type(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A parameter schema with its type made readable by the engine (see the module docstring).

    Example:
        >>> convert_type({"type": "list(str)", "description": "Days"})
        {'type': 'array', 'description': 'Days', 'items': {'type': 'string'}}
    """
    out = {k: v for k, v in schema.items() if k != "required"}
    kind = out.get("type")
    if isinstance(kind, str):
        listed = _LIST_OF.match(kind.strip())
        if listed:
            out["type"] = "array"
            out["items"] = {"type": _ITEM_TYPES.get(listed.group(1).lower(), listed.group(1).lower())}
    return out


def convert_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A tool of the test sets as the engine's ``{name, description, parameters}`` with a JSON Schema."""
    parameters = tool.get("parameters") or {}
    required = [name for name, schema in parameters.items() if isinstance(schema, Mapping) and schema.get("required")]
    top = tool.get("required")
    if isinstance(top, list):
        required += [name for name in top if name in parameters and name not in required]
    return {
        "name": tool["name"],
        "description": tool.get("description", ""),
        "parameters": {"type": "object", "properties": {name: convert_type(schema) for name, schema in parameters.items()},
                       "required": required},
    }


def convert_answer(answer: Mapping[str, Any]) -> dict[str, Any]:
    """``{"tool", "parameters"}`` (Seal-Tools) or ``{"name", "arguments"}`` as ``{"name", "arguments"}``."""
    return {"name": answer.get("name", answer.get("tool")),
            "arguments": dict(answer.get("arguments", answer.get("parameters")) or {})}


def convert_query(query: str | list[Mapping[str, Any]]) -> list[Message]:
    """The question as engine messages (a dialogue keeps its turns; see the module docstring)."""
    if isinstance(query, str):
        return [Message.user(query)]
    messages = []
    for turn in query:
        role = _ROLES.get(str(turn.get("role")))
        if role is None:
            raise ValueError(f"unknown role {turn.get('role')!r} in a test-set dialogue")
        content = turn.get("content") if isinstance(turn.get("content"), str) else json.dumps(turn.get("content"))
        messages.append(Message(role=role, content=content))  # type: ignore[arg-type]
    return messages


def load_set(data_dir: str | Path, name: str, limit: int | None = None) -> list[AcademicEntry]:
    """The entries of one set (``apibank_l1``, ``apibank_l2``, ``toolalpaca``, ``sealtool``)."""
    path = Path(data_dir) / f"{name}.json"
    if name not in SETS:
        raise ValueError(f"unknown test set {name!r}; use one of {list(SETS)}")
    if find_json(path) is None:
        raise FileNotFoundError(f"{path} does not exist (nor {path.name}.gz). Fix: pass --data the folder holding "
                                f"{', '.join(SETS)} (.json or .json.gz), or leave --data out for the shipped sets")
    rows = read_json(path)[:limit]
    return [AcademicEntry(set=name, index=i, messages=convert_query(row["query"]),
                          tools=[convert_tool(t) for t in row["tools"]],
                          gold=[convert_answer(a) for a in row["answers"]]) for i, row in enumerate(rows)]
