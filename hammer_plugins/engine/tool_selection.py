"""Tool selection for one call: when a tool set's block would pass the tool budget, offer the tools the
engine's selector (:mod:`~hammer_plugins.tools.selector`; by default
:class:`~hammer_plugins.tools.meaning.MeaningSelector`) chooses for the conversation, as many as fit.

Always offered: the tool a named ``tool_choice`` forces, the tools the conversation has called (so a
history's calls stay readable and a result's tool can be called again), and the tools the caller pins.
The selector reads the real descriptions; the prompt shows the selected tools masked as usual, so
masking keeps working and the masks never name the tools left out. What was offered travels with
the answer (``HammerResponse.offered_tools``) and is logged at debug level (this module's logger).
When Hammer answers ``[]`` and the selection left tools out, the selector's reserve is offered once, beside the
tools of the first pass (:attr:`Offer.widened`).

Example:
    >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend
    >>> from hammer_plugins.tools.meaning import as_selector
    >>> engine = HammerEngine(backend=ScriptedBackend([]), tool_budget=60)
    >>> tools = [{"name": f"tool_{i}", "description": f"Does thing number {i}."} for i in range(20)]
    >>> tools.append({"name": "get_weather", "description": "Current weather in a city."})
    >>> offer = offer_tools(engine.bind(tools), [Message.user("Weather in Paris?")], "auto", (), 60, engine.bind,
    ...                     as_selector("bm25"))
    >>> offer.offered
    ('get_weather',)
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hammer_plugins.engine.binding import ToolBinding
from hammer_plugins.engine.rules import check_pinned
from hammer_plugins.support.sized_cache import SizedCache
from hammer_plugins.tools.definition import Tool
from hammer_plugins.tools.ranking import ToolRanking, words
from hammer_plugins.tools.selection import select_tools
from hammer_plugins.tools.selector import SelectionQuery, ToolSelector
from hammer_plugins.values.messages import Message

log = logging.getLogger(__name__)

DEFAULT_TOOL_BUDGET = 1024
"""Prompt tokens the tools block may take before the engine selects among the tools (0: never select)."""

WIDENED_BUDGET = 2
"""The widened pass after Hammer's ``[]`` may take this many times the tool budget (the first pass's tools and the
reserve together)."""

# A query word list this short says little on its own ("yes", "do it"): the user's earlier words join it.
_SHORT_QUERY_WORDS = 3
# Characters of each tool result a caller's selector is given (SelectionQuery.results; the built-ins do not read them).
_RESULT_CHARS = 1000

# BM25 indexes of recent tool sets, in bytes: 6.6 MiB for a 9,000-tool set, its fingerprints included.
_RANKINGS: SizedCache[tuple[str, ...], ToolRanking] = SizedCache(32, 16 * 2**20)


class ConversationOffers:
    """The tools each recent conversation was offered last, so that a later turn keeps them while they hold what it
    needs (:attr:`~hammer_plugins.tools.selector.Selection.needed`): the tools block heads the prompt, and an
    unchanged block keeps the KV state cached for it. A conversation is known by its tool set, its system text and
    its first user message; at most ``max_entries`` are remembered (the least recently used go).

    Example:
        >>> offers = ConversationOffers()
        >>> key = offers.key(["a", "b"], [Message.user("Weather in Paris?")])
        >>> offers.put(key, ("a",)); offers.get(key)
        ('a',)
    """

    def __init__(self, max_entries: int = 1024) -> None:
        # An entry is a key and a few names: 1,024 of them are well under a megabyte.
        self._offers: SizedCache[str, tuple[str, ...]] = SizedCache(max_entries, max_entries * 4096)

    @staticmethod
    def key(names: Sequence[str], messages: Sequence[Message]) -> str:
        first = next((m.content for m in messages if m.role == "user"), "")
        system = "".join(m.content for m in messages[:1] if m.role == "system")
        digest = hashlib.sha256()
        for part in ("\x00".join(names), system, first):
            digest.update(part.encode("utf-8", "surrogatepass") + b"\x01")
        return digest.hexdigest()

    def get(self, key: str) -> tuple[str, ...] | None:
        return self._offers.get(key)

    def put(self, key: str, offered: tuple[str, ...]) -> None:
        self._offers.put(key, offered, len(key) + sum(map(len, offered)))


@dataclass(frozen=True)
class Offer:
    """What a call offers: the binding its prompt shows, and the names offered when a selection was made."""

    binding: ToolBinding
    offered: tuple[str, ...] | None = None  # None: every tool
    widened: tuple[str, ...] | None = None  # what to offer once if Hammer answers [] (None: nothing left to offer)


def _ranking(tools: Sequence[Tool]) -> ToolRanking:
    return _RANKINGS.get_or_make(tuple(t.fingerprint() for t in tools), lambda: ToolRanking(tools))


def selection_query(messages: Sequence[Message]) -> SelectionQuery:
    """What a selector reads of a conversation: the last user message, and the user's earlier messages
    when the last one says too little on its own; the tools called so far; the tool results since the last user
    message (for a caller's selector: the built-ins rank by the user's words). A caller's system text is left out
    (an agent's instructions would outweigh the question)."""
    asked = [m.content for m in messages if m.role == "user" and m.content.strip()]
    called = tuple(sorted(called_tools_in(messages)))
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    results = tuple(m.content[:_RESULT_CHARS] for m in messages[last_user + 1:] if m.role == "tool" and m.content.strip())
    if not asked:
        return SelectionQuery(text="", called=called, results=results)
    query = [asked[-1]]
    for earlier in reversed(asked[:-1]):
        if len(words(" ".join(query))) >= _SHORT_QUERY_WORDS:
            break
        query.append(earlier)
    return SelectionQuery(text="\n".join(query), context=tuple(asked[:-1][-4:]), called=called, results=results,
                          question=asked[-1])


def offer_tools(full: ToolBinding, messages: Sequence[Message], choice: str, pinned: Sequence[str],
                budget: int, bind: Callable[[list[Tool]], ToolBinding], selector: ToolSelector,
                forced: Sequence[str] | None = None, memory: ConversationOffers | None = None) -> Offer:
    """The tools this call offers (see the module); ``full`` is the whole tool set, bound, and ``bind``
    binds a subset of it as ``full`` was (masking, limits).

    ``pinned`` names tools always offered; a name that is not among the tools raises
    :class:`~hammer_plugins.values.errors.UnknownToolError`. ``budget`` 0 offers every tool. ``forced``: offer
    these names (and the tools that must stay) instead of asking the selector (the widening after ``[]``).
    ``memory``: what the conversation was offered before; kept while it holds the tools the selection needs.
    """
    names = [t.name for t in full.tools]
    index = {name: i for i, name in enumerate(names)}
    check_pinned(pinned, names)
    costs = full.costs()
    if budget <= 0 or sum(costs) <= budget:
        return Offer(full)
    keep = {index[p] for p in pinned} | {index[n] for n in called_tools_in(messages) if n in index}
    if choice in index:
        keep.add(index[choice])
    # The passes after tool results offer what the user's turn was offered (they ask the same question); only a
    # user's turn is remembered, so what a tool answered never changes the conversation's tools.
    after_results = bool(messages) and messages[-1].role == "tool"
    remembered = memory.key(names, messages) if memory is not None and forced is None else None
    if forced is None:
        selection = selector.select(selection_query(messages), full.tools)
        wanted, reserve = selection.offered, selection.reserve
        before = memory.get(remembered) if memory is not None and remembered is not None else None
        if before and set(selection.needed or selection.offered) <= set(before) and all(n in index for n in before):
            # A later turn that needs nothing new keeps the conversation's tools: the same prompt head, cached.
            reserve = tuple(n for n in (*wanted, *reserve) if n not in before)
            wanted = before
    else:
        # The widened pass offers what the first did and the reserve together: Hammer's [] over a set that held
        # the right tool must not leave it out now. Twice the budget, so the reserve fits beside them.
        wanted, reserve, budget = tuple(forced), (), budget * WIDENED_BUDGET

    order = list(dict.fromkeys(index[n] for n in wanted if n in index))
    if not order and not keep:
        order = list(range(len(names)))  # the selector knows nothing of this question: the tool set's order decides
    # The selector's order as scores: select_tools keeps the must-stay tools and takes the rest while they fit.
    scores = [0.0] * len(names)
    for position, i in enumerate(order):
        scores[i] = float(len(order) - position)
    chosen = select_tools(costs, scores, budget, keep, max_tools=len(order) + len(keep), names=names)
    offered = tuple(names[i] for i in chosen)
    spare = tuple(n for n in reserve if n in index and index[n] not in chosen)
    first = tuple(names[i] for i in sorted(keep)) + tuple(names[i] for i in order if i in chosen and i not in keep)
    widened = first + spare if spare else None
    if memory is not None and remembered is not None and not after_results:
        memory.put(remembered, offered)
    if log.isEnabledFor(logging.DEBUG):
        log.debug("offered %d of %d tools (%d of %d estimated tokens): %s%s", len(offered), len(names),
                  sum(costs[i] for i in chosen), sum(costs), ", ".join(offered),
                  "" if forced is None else " (widened after a refusal)")
    return Offer(bind([full.tools[i] for i in chosen]), offered, widened)


def matches_nothing(full: ToolBinding, messages: Sequence[Message]) -> bool:
    """Whether no tool shares a word with the question (the relevance gate's test): the ranking's scores
    are all zero. Measured against BFCL's irrelevance questions in docs/tools.md."""
    return max(_ranking(full.tools).scores(selection_query(messages).text), default=0.0) <= 0.0


def called_tools_in(messages: Sequence[Message]) -> frozenset[str]:
    """Every tool the conversation has called (not only in this turn): their calls stay in the prompt."""
    return frozenset(c.name for m in messages if m.role == "assistant" for c in m.tool_calls)
