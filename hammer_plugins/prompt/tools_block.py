"""The tools block of Hammer's prompt: each tool as Hammer's reference prompt shows it.

Hammer was trained on this rendering (bfcl-eval's ``HammerHandler``): the vLLM chat template
(``templates/hammer.jinja``) renders the same block.

Example:
    >>> from hammer_plugins.tools import to_tool
    >>> from hammer_plugins.prompt.tools_block import hammer_entry
    >>> tool = to_tool({"name": "get_weather", "description": "Weather.", "parameters": {"type": "object",
    ...     "properties": {"city": {"type": "string", "description": "City."}}, "required": ["city"]}})
    >>> hammer_entry(tool)["parameters"]["city"]
    {'type': 'string', 'description': 'City.', 'required': True}
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from hammer_plugins.tools.definition import Tool


def hammer_entry(tool: Tool) -> dict[str, Any]:
    """The entry of Hammer's tools block for ``tool``, as Hammer's reference prompt renders it.

    Properties are flattened (no ``properties``/``required`` wrapper), required parameters
    carry ``"required": true``, and a default is kept and appended to the description
    (exact rules: :func:`hammer_properties`).
    """
    return {"name": tool.name, "description": tool.description,
            "parameters": hammer_properties(tool.properties, tool.required)}


def hammer_properties(properties: Mapping[str, Any], required: Iterable[str]) -> dict[str, Any]:
    """Hammer's reference tool rendering: bfcl-eval's ``HammerHandler`` (the code behind Hammer's
    published BFCL scores), rule for rule.

    Each parameter keeps its keys in the order given. A parameter that has ``properties`` is
    replaced by that dict, its own required names marked ``"required": true``. Each top-level
    required name is marked ``"required": true``. A ``default`` stays as a key and
    ``default is '<value>'`` is appended to the description with no separator (``str(value)``).
    Where the reference would fail (a default without a description, a required name that is not a
    property) the parameter is rendered as far as the rule goes instead.
    """
    params: dict[str, Any] = {name: copy.deepcopy(dict(schema)) for name, schema in properties.items()}
    for name, schema in params.items():
        nested = schema.get("properties")
        if isinstance(nested, Mapping):
            inner = dict(nested)
            for key in schema["required"] if isinstance(schema.get("required"), list) else []:
                if isinstance(inner.get(key), dict):
                    inner[key]["required"] = True
            params[name] = inner
    for key in required:
        if key in params:
            params[key]["required"] = True
    for entry in params.values():
        if "default" in entry and isinstance(entry.get("description", ""), str):
            entry["description"] = f"{entry.get('description', '')}default is '{entry['default']}'"
    return params


def render_tools_block(tools: Iterable[Tool]) -> str:
    """The JSON text placed between ``[BEGIN OF AVAILABLE TOOLS]`` and ``[END OF AVAILABLE TOOLS]``."""
    return json.dumps([hammer_entry(t) for t in tools])


def estimate_tokens(text: str) -> int:
    """Prompt tokens ``text`` takes, estimated without a tokenizer (so planning loads no model): about 3.5
    characters a token for ASCII JSON and English (Qwen2.5's tokenizer reads BFCL's tools at 3.6-4.2),
    one token for every other character (CJK text takes about one a character).

    Example:
        >>> estimate_tokens('{"name": "get_weather"}'), estimate_tokens("天气")
        (7, 2)
    """
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return -(-ascii_chars * 2 // 7) + (len(text) - ascii_chars)


def entry_tokens(tool: Tool) -> int:
    """``tool``'s estimated tokens in the tools block (its entry and the separator after it)."""
    return estimate_tokens(json.dumps(hammer_entry(tool))) + 1
