"""The masking case study (Hammer paper, Figure 2): the test sets with their names replaced.

Every function and parameter name of an entry (in its tools and its gold answers) is replaced by
a random string from the paper's alphabet ``[A-Za-z_.0-9]``: 5 to 15 characters for functions, 4
to 10 for parameters, the same ones the training-time masking used. The strings are a pure
function of the set, the entry and a seed, so every model sees the same masked set. The gold
answers use the masked names too, so scoring needs no mapping back; a model that picks functions
by their names rather than their descriptions loses here.

Example:
    >>> from hammer_evals.academic.data import AcademicEntry
    >>> from hammer_plugins.values.messages import Message
    >>> entry = AcademicEntry(set="sealtool", index=3, messages=[Message.user("Battery of hX7?")],
    ...     tools=[{"name": "getBattery", "description": "Battery level", "parameters": {"type": "object",
    ...            "properties": {"vehicle_id": {"type": "str"}}, "required": ["vehicle_id"]}}],
    ...     gold=[{"name": "getBattery", "arguments": {"vehicle_id": "hX7"}}])
    >>> masked = mask_entry(entry)
    >>> masked.gold[0]["name"] == masked.tools[0]["name"] != "getBattery"
    True
    >>> list(masked.gold[0]["arguments"]) == masked.tools[0]["parameters"]["required"]
    True
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from hammer_plugins.tools.masking import FUNCTION_NAME_LENGTHS, PARAMETER_NAME_LENGTHS, random_name

from .data import AcademicEntry


def mask_entry(entry: AcademicEntry, seed: int = 0) -> AcademicEntry:
    """``entry`` with every function and parameter name replaced (tools and gold answers alike)."""
    digest = hashlib.sha256(f"{seed}:{entry.set}:{entry.index}".encode()).hexdigest()
    rng = random.Random(int(digest[:16], 16))
    taken_functions = {t["name"] for t in entry.tools}
    functions: dict[str, str] = {}
    parameters: dict[str, dict[str, str]] = {}
    tools: list[dict[str, Any]] = []
    for tool in entry.tools:
        functions[tool["name"]] = name = random_name(rng, *FUNCTION_NAME_LENGTHS, taken_functions)
        schema = tool["parameters"]
        taken = set(schema["properties"])
        renamed = {p: random_name(rng, *PARAMETER_NAME_LENGTHS, taken) for p in schema["properties"]}
        parameters[tool["name"]] = renamed
        tools.append({**tool, "name": name, "parameters": {
            **schema, "properties": {renamed[p]: s for p, s in schema["properties"].items()},
            "required": [renamed[p] for p in schema.get("required", [])]}})
    gold = []
    for call in entry.gold:
        renamed = parameters.get(call["name"], {})
        gold.append({"name": functions.get(call["name"], call["name"]),
                     "arguments": {renamed.get(k, k): v for k, v in call["arguments"].items()}})
    return entry.model_copy(update={"tools": tools, "gold": gold})
