"""Which tools a prompt offers when a tool set is larger than its budget: the rule, free of I/O.

An agent may hand Hammer hundreds of tools; each costs 100-1,000 prompt tokens, and a small model
both slows down and chooses worse as the list grows. :func:`select_tools` keeps the tools that must
stay, then adds the best-ranked others while they fit: at most ``max_tools`` tools and ``budget``
tokens in all, none that shares no word with the question or scores below ``min_ratio`` of the best. The answer is a set of
indices in the tools' own order, so the same question over the same tools always gives the same
prompt (and its KV prefix can be reused). Ties go to the earlier tool.

Example:
    >>> select_tools(costs=[100, 100, 100, 100], scores=[0.2, 3.0, 0.0, 2.5], budget=250, keep=[2])
    (1, 2)
    >>> select_tools(costs=[100, 100, 100], scores=[1.0, 0.9, 0.1], budget=1000, max_tools=5, min_ratio=0.5)
    (0, 1)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hammer_plugins.values.errors import ToolBudgetError


def select_tools(costs: Sequence[int], scores: Sequence[float], budget: int, keep: Iterable[int] = (),
                 max_tools: int | None = None, min_ratio: float = 0.0,
                 names: Sequence[str] | None = None) -> tuple[int, ...]:
    """The indices of the tools to offer, ascending (see the module).

    ``keep``: indices that are always offered; they count against ``budget`` and ``max_tools``, and
    :class:`ToolBudgetError` is raised when they alone exceed ``budget``. The others are taken by
    descending score (ties: lower index first) while the count stays within ``max_tools`` and the
    tokens within ``budget``; a tool that does not fit is passed over for a smaller one after it.
    A tool scoring zero (no word in common with the question) or below ``min_ratio`` times the best
    score is not taken, unless no tool scores above zero: then the ranking knows nothing, and the
    order of the tool set decides. At least one tool is offered: when even the best match alone
    is over the budget, it is offered alone.
    """
    if len(costs) != len(scores):
        raise ValueError(f"{len(costs)} costs for {len(scores)} scores")
    kept = sorted(set(keep))
    used = sum(costs[i] for i in kept)
    if used > budget:
        shown = ", ".join(names[i] if names else str(i) for i in kept[:8]) + (", ..." if len(kept) > 8 else "")
        raise ToolBudgetError(
            f"the tools that must be offered ({shown}) take {used} prompt tokens, more than the tool budget of "
            f"{budget}. Fix: pin fewer tools, raise tool_budget, or set tool_budget=0 to offer every tool.")
    chosen = set(kept)
    limit = len(costs) if max_tools is None else max(max_tools, len(kept))
    # The best score of all, kept tools included: when a kept tool matches (a tool called before), the others
    # that match nothing stay out rather than fill the budget.
    best = max(scores, default=0.0)
    floor = best * min_ratio if best > 0 else 0.0
    for index in sorted((i for i in range(len(costs)) if i not in chosen), key=lambda i: (-scores[i], i)):
        if len(chosen) >= limit:
            break
        if best > 0 and (scores[index] <= 0 or scores[index] < floor):
            break  # no word in common with the question, or far below the best match
        if used + costs[index] <= budget:
            chosen.add(index)
            used += costs[index]
    if not chosen and costs:  # one tool larger than the whole budget: it is still the best match
        chosen.add(min(range(len(costs)), key=lambda i: (-scores[i], i)))
    return tuple(sorted(chosen))
