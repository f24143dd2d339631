"""Notebook views: small HTML tables for an answer, a slot-filling snapshot and history, and a tool set.

Jupyter shows an object's ``_repr_html_``; the classes' own ``_repr_html_`` call these. Every value is
escaped (a tool's description or the model's text is text, never markup), and nothing is loaded or run.

Example:
    >>> print(table([("kind", "<b>text</b>")]))
    <table class="hammer"><tr><th>kind</th><td>&lt;b&gt;text&lt;/b&gt;</td></tr></table>
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import Any

MAX_SHOWN_CHARS = 2000
"""Longest text a view shows of one value (a long answer or prompt is cut, with the number of characters left)."""


def text(value: Any) -> str:
    """``value`` as escaped text, cut at :data:`MAX_SHOWN_CHARS`."""
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(shown) > MAX_SHOWN_CHARS:
        shown = shown[:MAX_SHOWN_CHARS] + f"... ({len(shown) - MAX_SHOWN_CHARS} more characters)"
    return html.escape(shown)


def table(rows: Iterable[tuple[str, Any]], title: str | None = None) -> str:
    """A two-column table of (name, value) rows; values escaped."""
    body = "".join(f"<tr><th>{html.escape(name)}</th><td>{text(value)}</td></tr>" for name, value in rows)
    caption = f"<caption>{html.escape(title)}</caption>" if title else ""
    return f'<table class="hammer">{caption}{body}</table>'


def grid(header: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None) -> str:
    """A table with a header row; cells escaped."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{text(c)}</td>" for c in row) + "</tr>" for row in rows)
    caption = f"<caption>{html.escape(title)}</caption>" if title else ""
    return f'<table class="hammer">{caption}<tr>{head}</tr>{body}</table>'


def call_text(name: str, arguments: dict[str, Any]) -> str:
    """A call as one short line: ``get_weather(city='Paris')``.

    Example:
        >>> call_text("get_weather", {"city": "Paris"})
        "get_weather(city='Paris')"
    """
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


def snapshot_view(snapshot: Any) -> str:
    """A slot-filling :class:`~hammer_plugins.slot_filling.snapshots.Snapshot`: the function, the state, and
    each slot with its value and whether it is filled, new, carried, changed or missing."""
    changed = {c.name: c for c in snapshot.changed}
    rows = [(name, value, "changed from " + repr(changed[name].old) if name in changed
             else "new" if name in snapshot.added else "carried" if name in snapshot.carried else "filled")
            for name, value in snapshot.arguments.items()]
    rows += [(name, "", "missing (required)") for name in snapshot.missing_required]
    rows += [(name, "", "missing (optional)") for name in snapshot.missing_optional]
    rows += [(name, snapshot.model_arguments.get(name, ""), "not in the schema: dropped") for name in snapshot.hallucinated]
    head: list[tuple[str, Any]] = [("turn", snapshot.turn), ("function", snapshot.function or "none"),
                                   ("state", snapshot.state)]
    if snapshot.shift:
        head.append(("shift", f"{snapshot.shift.kind}: {snapshot.shift.from_function} -> {snapshot.shift.to_function}"))
    if snapshot.question:
        head.append(("question", snapshot.question))
    return table(head, "Snapshot") + (grid(["slot", "value", ""], rows, "slots") if rows else "")


def history_view(state: Any) -> str:
    """A slot-filling history (:class:`~hammer_plugins.slot_filling.snapshots.ConversationState`): the state now,
    then one row per turn's snapshot."""
    rows = [(s.turn, s.function or "none", s.state, s.filled, s.missing_required,
             [f"{c.name}: {c.old!r} -> {c.new!r}" for c in s.changed]) for s in state.snapshots]
    now = table([("state", state.state), ("function", state.function or "none"), ("arguments", state.arguments),
                 ("executed", [call_text(c.name, c.arguments) for c in state.executed])], "ConversationState")
    return now + grid(["turn", "function", "state", "filled", "missing", "changed"], rows, "turns")
