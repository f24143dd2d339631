"""Function masking at inference (Hammer paper, section 4.1).

Function and parameter names are replaced by opaque strings (the rest of each schema, defaults
included, renders as usual), and the model must choose from the descriptions alone. Calls in the answer are
mapped back to the real names; a masked name the map does not know becomes an invalid call,
never a call to some other real tool.

Masks are a pure function of the tool set, so the prompt prefix (and the KV cache holding it)
stays identical across the turns of a conversation.

Example:
    >>> from hammer_plugins import Tool, ToolCall
    >>> from hammer_plugins.tools.masking import NameMask
    >>> tool = Tool(name="get_weather", description="Weather for a city",
    ...             parameters={"type": "object", "properties": {"city": {"type": "string"}}})
    >>> mask = NameMask.for_tools([tool])
    >>> masked = mask.masked_tools[0]
    >>> masked.name != "get_weather"
    True
    >>> call = ToolCall(name=masked.name, arguments={next(iter(masked.properties)): "Paris"})
    >>> mask.unmask(call).arguments
    {'city': 'Paris'}
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hammer_plugins.tools.definition import Tool
from hammer_plugins.values.calls import InvalidToolCall, ToolCall

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_.0123456789"
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


FUNCTION_NAME_LENGTHS = (5, 15)
PARAMETER_NAME_LENGTHS = (4, 10)
"""The lengths of masked names (the paper's training-time masking: functions 5-15, parameters 4-10)."""


def random_name(rng: random.Random, low: int, high: int, taken: set[str]) -> str:
    """A fresh opaque name of ``low`` to ``high`` characters from the paper's alphabet ``[A-Za-z_.0-9]``
    (a letter first), not in ``taken`` (which it joins).

    Example:
        >>> name = random_name(random.Random(0), 5, 15, set())
        >>> 5 <= len(name) <= 15 and name[0].isalpha()
        True
    """
    while True:
        length = rng.randint(low, high)
        # A letter first keeps the name a plausible identifier; the rest follows the paper's alphabet.
        name = rng.choice(_LETTERS) + "".join(rng.choice(_ALPHABET) for _ in range(length - 1))
        if name not in taken:
            taken.add(name)
            return name


@dataclass(frozen=True)
class NameMask:
    """A reversible renaming of a tool set's function and top-level parameter names.

    Build it with :meth:`for_tools`; it is deterministic for a given tool set.
    """

    masked_tools: list[Tool]
    function_names: dict[str, str] = field(default_factory=dict)  # masked -> real
    parameter_names: dict[str, dict[str, str]] = field(default_factory=dict)  # real fn -> {masked -> real}

    @classmethod
    def for_tools(cls, tools: Sequence[Tool]) -> NameMask:
        digest = hashlib.sha256("\n".join(t.fingerprint() for t in tools).encode()).hexdigest()
        rng = random.Random(int(digest[:16], 16))
        taken_functions = {t.name for t in tools}
        masked_tools: list[Tool] = []
        function_names: dict[str, str] = {}
        parameter_names: dict[str, dict[str, str]] = {}
        for tool in tools:
            fn_mask = random_name(rng, *FUNCTION_NAME_LENGTHS, taken_functions)
            function_names[fn_mask] = tool.name
            taken_params = set(tool.properties)
            param_map: dict[str, str] = {}
            properties: dict[str, Any] = {}
            for pname, pschema in tool.properties.items():
                p_mask = random_name(rng, *PARAMETER_NAME_LENGTHS, taken_params)
                param_map[p_mask] = pname
                properties[p_mask] = copy.deepcopy(pschema)
            reverse = {real: masked for masked, real in param_map.items()}
            parameter_names[tool.name] = param_map
            masked_tools.append(Tool(
                name=fn_mask,
                description=tool.description,
                parameters={**{k: v for k, v in tool.parameters.items() if k not in ("properties", "required")},
                            "properties": properties,
                            "required": [reverse[r] for r in tool.required]},
            ))
        return cls(masked_tools=masked_tools, function_names=function_names, parameter_names=parameter_names)

    def mask_call(self, call: ToolCall) -> ToolCall:
        """The masked form of a real call (for rendering earlier turns of the conversation)."""
        fn_reverse = {real: masked for masked, real in self.function_names.items()}
        if call.name not in fn_reverse:
            return call
        p_reverse = {real: masked for masked, real in self.parameter_names[call.name].items()}
        args = {p_reverse.get(k, k): v for k, v in call.arguments.items()}
        return ToolCall(id=call.id, name=fn_reverse[call.name], arguments=args)

    def unmask(self, call: ToolCall) -> ToolCall | InvalidToolCall:
        """The real call, or an invalid call when a masked name is unknown."""
        real_name = self.function_names.get(call.name)
        raw = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False, default=str)
        if real_name is None:
            return InvalidToolCall(raw=raw, name=call.name, arguments=json.dumps(call.arguments, default=str),
                                   id=call.id, reason=f"unknown masked function name {call.name!r}")
        param_map = self.parameter_names[real_name]
        unknown = [k for k in call.arguments if k not in param_map]
        if unknown:
            return InvalidToolCall(raw=raw, name=real_name, arguments=json.dumps(call.arguments, default=str),
                                   id=call.id, reason=f"unknown masked parameter names {unknown} for {real_name!r}")
        return ToolCall(id=call.id, name=real_name, arguments={param_map[k]: v for k, v in call.arguments.items()})
