"""Binding a tool set: converted once, masked, its prompt prefix rendered, its grammars cached.

A :class:`ToolBinding` is everything derived from one tool set; an engine keeps its recent bindings,
and the grammars of recent tool sets are shared by every engine in the process.

Example:
    >>> from hammer_plugins.engine.binding import bind_tools
    >>> binding = bind_tools([{"name": "ping", "parameters": {}}], masked=False, prompt_format="hammer2.1")
    >>> [t.name for t in binding.tools], binding.grammar("auto", True).gbnf != ""
    (['ping'], True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hammer_plugins.grammar.builder import Grammar, build_grammar
from hammer_plugins.output.views import grid
from hammer_plugins.prompt.render import render_prefix
from hammer_plugins.prompt.tools_block import entry_tokens
from hammer_plugins.support.sized_cache import SizedCache
from hammer_plugins.tools.definition import Tool, convert_tools, relaxed_tool
from hammer_plugins.tools.limits import SchemaLimits, current_limits, schema_limits
from hammer_plugins.tools.masking import NameMask


@dataclass(frozen=True)
class ToolBinding:
    """Everything derived once from a tool set: the tools the prompt shows, masks, prefix, grammars."""

    tools: tuple[Tool, ...]
    prompt_tools: tuple[Tool, ...]
    mask: NameMask | None
    prefix: str
    prompt_format: str
    limits: SchemaLimits | None = None  # the budgets its grammars are built under (None: those in force)

    def __repr__(self) -> str:
        return f"ToolBinding({len(self.tools)} tools: {', '.join(t.name for t in self.tools[:8])}" + (
            ", ..." if len(self.tools) > 8 else "") + f"; masked={self.mask is not None})"

    def _repr_html_(self) -> str:
        """The notebook view: each tool, the name the model reads (masked or not) and its estimated tokens."""
        costs = self.costs()
        rows = [(t.name, p.name, cost, t.description) for t, p, cost in zip(self.tools, self.prompt_tools, costs, strict=True)]
        return grid(["tool", "the model reads", "≈ tokens", "description"], rows,
                    f"{len(rows)} tools, ≈{sum(costs)} tokens in the tools block")

    def costs(self) -> tuple[int, ...]:
        """Each tool's estimated tokens in the prompt's tools block, as the prompt shows it (masked or not)."""
        known = self.__dict__.get("_costs")
        if known is not None:  # a binding is immutable and reused for every call with its tools: count once
            return known  # type: ignore[no-any-return]
        key = tuple(t.fingerprint() for t in self.prompt_tools)
        found = _COSTS.get(key)
        if found is None:
            found = tuple(entry_tokens(t) for t in self.prompt_tools)
            _COSTS.put(key, found)
        object.__setattr__(self, "_costs", found)
        return found

    def grammar(self, tool_choice: str, parallel: bool, only: frozenset[str] = frozenset(),
                partial_calls: bool = False) -> Grammar:
        """The grammar for ``tool_choice``; ``only`` (real names) narrows the callable tools when not
        empty; ``partial_calls`` makes every parameter optional (a slot-filling snapshot)."""
        shown = tool_choice
        if self.mask is not None and tool_choice not in ("auto", "required"):
            shown = next(m for m, real in self.mask.function_names.items() if real == tool_choice)
        tools = self.prompt_tools
        if only:
            tools = tuple(p for p, t in zip(self.prompt_tools, self.tools, strict=True) if t.name in only)
        with schema_limits(self.limits):
            if partial_calls:
                tools = tuple(relaxed_tool(t) for t in tools)
            return _grammar_cached(tools, shown, parallel)


# The grammars of recent tool sets, shared by every engine in the process: bounded by entries and by the
# bytes keys and grammars hold (and, with every other cache, by CACHE_MEMORY_BYTES), so many large distinct
# tool sets cannot fill the memory.
GRAMMAR_CACHE_ENTRIES = 128
GRAMMAR_CACHE_BYTES = 64 * 2**20
GRAMMAR_CACHE_CHARS = GRAMMAR_CACHE_BYTES  # its name before the caches counted bytes
_GRAMMARS: SizedCache[tuple[Any, ...], Grammar] = SizedCache(GRAMMAR_CACHE_ENTRIES, GRAMMAR_CACHE_BYTES)
# Each tool set's estimated costs (tool selection reads them on every call of a large set): 3 MiB for a
# 9,000-tool set, its fingerprints included.
_COSTS: SizedCache[tuple[str, ...], tuple[int, ...]] = SizedCache(64, 16 * 2**20)


def _grammar_cached(tools: tuple[Tool, ...], tool_choice: str, parallel: bool) -> Grammar:
    prints = tuple(t.fingerprint() for t in tools)
    key = (prints, tool_choice, parallel, current_limits())
    found = _GRAMMARS.get(key)
    if found is not None:
        return found
    grammar = build_grammar(list(tools), tool_choice, parallel)
    _GRAMMARS.put(key, grammar)
    return grammar


def new_binding_cache() -> SizedCache[tuple[Any, ...], ToolBinding]:
    """An engine's cache of the tool sets it bound recently: by entries and by bytes (10 MiB for a
    9,000-tool set)."""
    return SizedCache(32, 32 * 2**20)


def bind_tools(tools: Sequence[Any], masked: bool, prompt_format: str,
               cache: SizedCache[tuple[Any, ...], ToolBinding] | None = None) -> ToolBinding:
    """Convert and prepare a tool set once (under the schema limits in force); ``cache`` keeps it. A tool
    set converted recently (the door validated it) is not converted again (:func:`convert_tools`)."""
    converted, prints = convert_tools(tools)
    key = (prints, masked, prompt_format, current_limits())
    binding = cache.get(key) if cache is not None else None
    if binding is not None:
        return binding
    mask = NameMask.for_tools(converted) if masked and converted else None
    prompt_tools = tuple(mask.masked_tools) if mask else converted
    binding = ToolBinding(tools=converted, prompt_tools=prompt_tools, mask=mask,
                          prefix=render_prefix(prompt_tools, prompt_format), prompt_format=prompt_format,
                          limits=current_limits())
    if cache is not None:
        cache.put(key, binding)
    return binding
