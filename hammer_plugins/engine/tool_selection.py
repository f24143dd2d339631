"""Tool selection for one call: when a tool set's block would pass the tool budget, offer the tools whose
descriptions best match the conversation (ranked by :mod:`~hammer_plugins.tools.ranking`, chosen by
:func:`~hammer_plugins.tools.selection.select_tools`).

Always offered: the tool a named ``tool_choice`` forces, the tools the conversation has called (so a
history's calls stay readable and a result's tool can be called again), and the tools the caller pins.
The ranking reads the real descriptions; the prompt shows the selected tools masked as usual, so
masking keeps working and the masks never name the tools left out. What was offered travels with
the answer (``HammerResponse.offered_tools``) and is logged at debug level (this module's logger).

Example:
    >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend
    >>> engine = HammerEngine(backend=ScriptedBackend([]), tool_budget=60)
    >>> tools = [{"name": f"tool_{i}", "description": f"Does thing number {i}."} for i in range(20)]
    >>> tools.append({"name": "get_weather", "description": "Current weather in a city."})
    >>> offer = offer_tools(engine.bind(tools), [Message.user("Weather in Paris?")], "auto", (), 60, engine.bind)
    >>> offer.offered
    ('get_weather',)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hammer_plugins.engine.binding import ToolBinding
from hammer_plugins.support.sized_cache import SizedCache
from hammer_plugins.tools.definition import Tool
from hammer_plugins.tools.ranking import ToolRanking, words
from hammer_plugins.tools.selection import select_tools
from hammer_plugins.values.errors import UnknownToolError
from hammer_plugins.values.messages import Message

log = logging.getLogger(__name__)

DEFAULT_TOOL_BUDGET = 1024
"""Prompt tokens the tools block may take before the engine selects among the tools (0: never select)."""
MAX_OFFERED_TOOLS = 2
"""The most tools a selection offers beyond those that must stay. Measured on 36 BFCL questions among 1,000 pooled
functions (docs/benchmarks/tools/selection_sweep.json): 1 tool: 18 right (the ranking's first is right 78% of the
time); 2: 21, as many as with each question's own functions, at 1.02x their median time; 4: 17, at 1.48x (the
stand-in model calls the look-alikes too)."""
MIN_SCORE_RATIO = 0.0
"""A tool scoring below this share of the best score is not offered."""

# A query word list this short says little on its own ("yes", "do it"): the user's earlier words join it.
_SHORT_QUERY_WORDS = 3

_RANKINGS: SizedCache[tuple[str, ...], ToolRanking] = SizedCache(32, 2_000_000)


@dataclass(frozen=True)
class Offer:
    """What a call offers: the binding its prompt shows, and the names offered when a selection was made."""

    binding: ToolBinding
    offered: tuple[str, ...] | None = None  # None: every tool


def _ranking(tools: Sequence[Tool]) -> ToolRanking:
    key = tuple(t.fingerprint() for t in tools)
    found = _RANKINGS.get(key)
    if found is None:
        found = ToolRanking(tools)
        _RANKINGS.put(key, found, sum(map(len, key)) // 8)
    return found


def selection_query(messages: Sequence[Message]) -> str:
    """What the ranking reads of a conversation: the last user message, and the user's earlier messages
    when the last one says too little on its own. A caller's system text is left out (an agent's
    instructions would outweigh the question)."""
    asked = [m.content for m in messages if m.role == "user" and m.content.strip()]
    if not asked:
        return ""
    query = [asked[-1]]
    for earlier in reversed(asked[:-1]):
        if len(words(" ".join(query))) >= _SHORT_QUERY_WORDS:
            break
        query.append(earlier)
    return "\n".join(query)


def offer_tools(full: ToolBinding, messages: Sequence[Message], choice: str, pinned: Sequence[str],
                budget: int, bind: Callable[[list[Tool]], ToolBinding]) -> Offer:
    """The tools this call offers (see the module); ``full`` is the whole tool set, bound, and ``bind``
    binds a subset of it as ``full`` was (masking, limits).

    ``pinned`` names tools always offered; a name that is not among the tools raises
    :class:`~hammer_plugins.values.errors.UnknownToolError`. ``budget`` 0 offers every tool.
    """
    names = [t.name for t in full.tools]
    index = {name: i for i, name in enumerate(names)}
    unknown = [p for p in pinned if p not in index]
    if unknown:
        raise UnknownToolError(f"pinned tools {unknown[:8]} are not among the {len(names)} tools given. Fix: pin "
                               "names of tools you pass, e.g. pinned_tools=['get_weather'].")
    costs = full.costs()
    if budget <= 0 or sum(costs) <= budget:
        return Offer(full)
    keep = {index[p] for p in pinned} | {index[n] for n in called_tools_in(messages) if n in index}
    if choice in index:
        keep.add(index[choice])
    scores = _ranking(full.tools).scores(selection_query(messages))
    chosen = select_tools(costs, scores, budget, keep, max_tools=MAX_OFFERED_TOOLS + len(keep),
                          min_ratio=MIN_SCORE_RATIO, names=names)
    offered = tuple(names[i] for i in chosen)
    if log.isEnabledFor(logging.DEBUG):
        log.debug("offered %d of %d tools (%d of %d estimated tokens): %s", len(offered), len(names),
                  sum(costs[i] for i in chosen), sum(costs), ", ".join(offered))
    return Offer(bind([full.tools[i] for i in chosen]), offered)


def matches_nothing(full: ToolBinding, messages: Sequence[Message]) -> bool:
    """Whether no tool shares a word with the question (the relevance gate's test): the ranking's scores
    are all zero. Measured against BFCL's irrelevance questions in docs/tools.md."""
    return max(_ranking(full.tools).scores(selection_query(messages)), default=0.0) <= 0.0


def called_tools_in(messages: Sequence[Message]) -> frozenset[str]:
    """Every tool the conversation has called (not only in this turn): their calls stay in the prompt."""
    return frozenset(c.name for m in messages if m.role == "assistant" for c in m.tool_calls)
