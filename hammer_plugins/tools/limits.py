"""The budgets every tool set and response schema is held to while it is converted and its grammar built.

:class:`SchemaLimits` names them; :func:`schema_limits` holds a block of code to a set of them, and the
process default reads ``HAMMER_LIMIT_<FIELD>`` environment variables. A conversion spends one
:class:`Budget` (schema objects, text, enum members, CPU time), checked as the work goes, so a hostile
schema is refused long before it is expanded.

Example:
    >>> from hammer_plugins.tools.limits import SchemaLimits, schema_limits, current_limits
    >>> with schema_limits(SchemaLimits(max_depth=8)):
    ...     current_limits().max_depth
    8
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from hammer_plugins.values.errors import SchemaLimitError


@dataclass(frozen=True)
class SchemaLimits:
    """The budgets every tool set and ``response_format`` schema is held to, checked while the work is
    done (never after it): a schema over one is refused with :class:`~hammer_plugins.values.errors.SchemaLimitError`
    (a :class:`~hammer_plugins.values.errors.SchemaConversionError`: ``400 invalid_tool_schema`` on the server)
    naming the limit, how far the request went and the fix.

    The defaults leave real tools far inside (the largest BFCL v4 tool set is given in
    ``docs/engine.md``) while a hostile request is refused in well under a second. Change them per
    engine (``engine.schema_limits = SchemaLimits(max_schema_nodes=100_000)``), or for a block of
    code with :func:`schema_limits`. The process default reads ``HAMMER_LIMIT_<FIELD>`` environment
    variables (``HAMMER_LIMIT_MAX_SCHEMA_NODES=50000``), so ``hammer serve`` and the CLI take them too;
    :func:`set_default_limits` changes it in code.

    Attributes:
        max_schema_nodes: schema objects in one tool set (or response schema) counted as ``$ref`` is
            inlined: a ``$ref`` used twice counts its target twice, so a schema whose definitions each
            refer twice to the next one is refused after this many, not after 2**depth.
        max_schema_bytes: characters of text (descriptions, names, enum members, defaults, ...) in one
            tool set once ``$ref`` is inlined: what the prompt's tools block grows to.
        max_depth: nesting of JSON objects and arrays inside one schema, after ``$ref`` inlining.
        max_enum_values: members of one ``enum``.
        max_enum_bytes: characters of all enum and const members of one tool set together (each
            member character becomes about 25 characters of grammar).
        max_count: the largest ``minItems``, ``maxLength``, ... a schema may state.
        max_min_items: the largest ``minItems`` the grammar enforces (a grammar engine unrolls it).
        max_grammar_bytes: characters of one grammar (both notations together).
        max_build_seconds: CPU time (of the converting thread) for converting one tool set, or for
            building one grammar: the work itself, whatever else the machine is doing.

    Example:
        >>> from hammer_plugins import HammerEngine, SchemaLimitError, SchemaLimits, ScriptedBackend
        >>> engine = HammerEngine(backend=ScriptedBackend([]))
        >>> engine.schema_limits = SchemaLimits(max_enum_values=3)
        >>> tool = {"name": "pick", "parameters": {"type": "object", "properties": {
        ...     "x": {"type": "string", "enum": ["a", "b", "c", "d"]}}}}
        >>> try:
        ...     engine.bind([tool])
        ... except SchemaLimitError as exc:
        ...     print(exc.limit)
        max_enum_values
    """

    max_schema_nodes: int = 10_000
    max_schema_bytes: int = 2_000_000
    max_depth: int = 64
    max_enum_values: int = 10_000
    max_enum_bytes: int = 100_000
    max_count: int = 2**31 - 1
    max_min_items: int = 1_000
    max_grammar_bytes: int = 16_000_000
    max_build_seconds: float = 5.0

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"SchemaLimits.{item.name} must be a positive number, got {value!r}")


def limits_from_env(environ: Mapping[str, str] | None = None) -> SchemaLimits:
    """The defaults, with any ``HAMMER_LIMIT_<FIELD>`` environment variable applied.

    Example:
        >>> limits_from_env({"HAMMER_LIMIT_MAX_DEPTH": "32"}).max_depth
        32
    """
    import os

    env = os.environ if environ is None else environ
    changes: dict[str, Any] = {}
    for item in fields(SchemaLimits):
        raw = env.get(f"HAMMER_LIMIT_{item.name.upper()}")
        if raw is None or not raw.strip():
            continue
        try:
            changes[item.name] = float(raw) if item.type in (float, "float") else int(raw.replace("_", ""))
        except ValueError:
            raise ValueError(f"HAMMER_LIMIT_{item.name.upper()}={raw!r} is not a number. Fix: set a positive "
                             "number, or unset it for the default") from None
    return SchemaLimits(**changes)


DEFAULT_LIMITS = SchemaLimits()
_default_limits = limits_from_env()
_LIMITS: contextvars.ContextVar[SchemaLimits | None] = contextvars.ContextVar("hammer_schema_limits", default=None)
_BUDGET: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("hammer_schema_budget", default=None)


def current_limits() -> SchemaLimits:
    """The :class:`SchemaLimits` in force here: those of :func:`schema_limits`, else the process default."""
    return _LIMITS.get() or _default_limits


def set_default_limits(limits: SchemaLimits | None) -> SchemaLimits:
    """Set the process default (``None``: the built-in defaults with ``HAMMER_LIMIT_*`` applied); returns it."""
    global _default_limits
    if limits is not None and not isinstance(limits, SchemaLimits):
        raise TypeError(f"expected SchemaLimits, got {type(limits).__name__}")
    _default_limits = limits if limits is not None else limits_from_env()
    return _default_limits


@contextlib.contextmanager
def schema_limits(limits: SchemaLimits | None) -> Iterator[SchemaLimits]:
    """Hold the tool conversions and grammars built inside the block to ``limits`` (None: leave as is).

    Example:
        >>> from hammer_plugins import SchemaLimitError, Tool
        >>> with schema_limits(SchemaLimits(max_depth=4)):
        ...     try:
        ...         Tool(name="f", parameters={"type": "object", "properties": {"a": {"type": "object",
        ...             "properties": {"b": {"type": "object", "properties": {"c": {}}}}}}})
        ...     except SchemaLimitError as exc:
        ...         print(exc.limit)
        max_depth
    """
    if limits is None:
        yield current_limits()
        return
    token = _LIMITS.set(limits)
    try:
        yield limits
    finally:
        _LIMITS.reset(token)


class Budget:
    """What one conversion (a tool set, a response schema) or one grammar build has spent so far."""

    def __init__(self, limits: SchemaLimits) -> None:
        self.limits = limits
        self.nodes = 0
        self.bytes = 0
        self.enum_bytes = 0
        self.started = time.thread_time()  # CPU time of this thread: the work done, not the machine's load
        self._ticks = 0
        self._sizes: dict[int, tuple[Any, int]] = {}

    def tick(self, tool: str, path: str) -> None:
        """Check the clock now and then (every 64 steps)."""
        self._ticks += 1
        if self._ticks & 63 == 0:
            elapsed = time.thread_time() - self.started
            if elapsed > self.limits.max_build_seconds:
                raise SchemaLimitError(tool, path, "max_build_seconds", elapsed, self.limits.max_build_seconds,
                                       "the time spent converting the tools or building their grammar")

    def node(self, tool: str, path: str, depth: int, text: int) -> None:
        """One schema object more (after ``$ref`` inlining), at ``depth``, holding ``text`` characters."""
        limits = self.limits
        self.nodes += 1
        self.bytes += text
        if depth > limits.max_depth:
            raise SchemaLimitError(tool, path, "max_depth", depth, limits.max_depth, "the schema's nesting depth",
                                   "flatten the schema, or pass deep structures as a JSON string")
        if self.nodes > limits.max_schema_nodes:
            raise SchemaLimitError(tool, path, "max_schema_nodes", self.nodes, limits.max_schema_nodes,
                                   "the number of schema objects once $ref is inlined",
                                   "use fewer or smaller tools, or reference shared definitions fewer times")
        if self.bytes > limits.max_schema_bytes:
            raise SchemaLimitError(tool, path, "max_schema_bytes", self.bytes, limits.max_schema_bytes,
                                   "the text in the schemas once $ref is inlined",
                                   "shorten descriptions and enums")
        self.tick(tool, path)

    def enum(self, tool: str, path: str, values: list[Any]) -> None:
        limits = self.limits
        if len(values) > limits.max_enum_values:
            raise SchemaLimitError(tool, path, "max_enum_values", len(values), limits.max_enum_values,
                                   "the number of enum members",
                                   "take the value as a string and describe the choices")
        size = sum(self.size(tool, path, v) for v in values)
        self.enum_bytes += size
        self.node(tool, path, 0, size)  # the members are text of the schema too
        if self.enum_bytes > limits.max_enum_bytes:
            raise SchemaLimitError(tool, path, "max_enum_bytes", self.enum_bytes, limits.max_enum_bytes,
                                   "the characters of all enum and const members",
                                   "take the value as a string and describe the choices")

    def size(self, tool: str, path: str, value: Any) -> int:
        """Characters ``value`` takes as JSON (roughly), memoized per object; nesting bounded by ``max_depth``."""
        if isinstance(value, str):
            return len(value) + 2
        if not isinstance(value, (dict, list, tuple)):
            return 8
        known = self._sizes.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        total = 0
        stack: list[tuple[Any, int]] = [(value, 1)]
        while stack:
            item, depth = stack.pop()
            if depth > self.limits.max_depth:
                raise SchemaLimitError(tool, path, "max_depth", depth, self.limits.max_depth,
                                       "the nesting depth of a value in the schema",
                                       "flatten the value, or pass deep structures as a JSON string")
            if isinstance(item, Mapping):
                total += 2
                for key, sub in item.items():
                    total += len(str(key)) + 4
                    stack.append((sub, depth + 1))
            elif isinstance(item, (list, tuple)):
                total += 2 + len(item)
                stack.extend((sub, depth + 1) for sub in item)
            elif isinstance(item, str):
                total += len(item) + 2
            else:
                total += 8
            if total > self.limits.max_schema_bytes:
                raise SchemaLimitError(tool, path, "max_schema_bytes", total, self.limits.max_schema_bytes,
                                       "the text of a value in the schema")
            self.tick(tool, path)
        self._sizes[id(value)] = (value, total)
        return total


@contextlib.contextmanager
def budget() -> Iterator[Budget]:
    """The budget of the conversion under way, or a new one for the limits in force."""
    active = _BUDGET.get()
    if active is not None:
        yield active
        return
    budget = Budget(current_limits())
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


@contextlib.contextmanager
def fresh_budget() -> Iterator[Budget]:
    """A new budget for the limits in force (a grammar build: its own clock, whatever ran before)."""
    budget = Budget(current_limits())
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)



def active_budget() -> Budget | None:
    """The budget of the conversion or grammar build under way on this thread or task, if any."""
    return _BUDGET.get()
