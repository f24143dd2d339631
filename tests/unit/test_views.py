"""The notebook views (``_repr_html_``) escape what they show, and the plain reprs stay one short line."""

from __future__ import annotations

import html.parser

from hammer_plugins import HammerEngine, HammerResponse, ScriptedBackend, ToolCall, Usage
from hammer_plugins.slot_filling.snapshots import ConversationState, SlotChange, Snapshot

HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


class Tags(html.parser.HTMLParser):
    def __init__(self, markup: str) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self.tags.add(tag)


def test_every_view_is_tables_only_with_the_hostile_text_escaped() -> None:
    response = HammerResponse(kind="tool_calls", text=HOSTILE, tool_calls=[ToolCall(name="f", arguments={"x": HOSTILE})],
                              usage=Usage(prompt_tokens=3, completion_tokens=2), timings={"time_to_first_token": 0.5})
    snapshot = Snapshot(turn=2, function="pay_fine", arguments={"city": HOSTILE, "plate": "D789"}, filled=["city", "plate"],
                        changed=[SlotChange(name="plate", old="D456", new="D789")], missing_optional=["note"],
                        state="ready")
    history = ConversationState(state="ready", function="pay_fine", arguments=snapshot.arguments, snapshots=[snapshot])
    binding = HammerEngine(backend=ScriptedBackend([])).bind([{"name": "f", "description": HOSTILE}])
    for view in (response._repr_html_(), snapshot._repr_html_(), history._repr_html_(), binding._repr_html_()):
        assert Tags(view).tags <= {"table", "caption", "tr", "th", "td"}, view
        assert "&lt;script&gt;" in view
    assert "changed from &#x27;D456&#x27;" in snapshot._repr_html_() and "missing (optional)" in snapshot._repr_html_()
    assert "0.50 s" in response._repr_html_()


def test_the_plain_reprs_are_one_short_line() -> None:
    response = HammerResponse(kind="text", text="word " * 500)
    start = ("word " * 12)[:60] + "..."
    assert repr(response) == f"HammerResponse(kind='text', text={start!r}, finish_reason='stop', tokens=0+0)"
    snapshot = Snapshot(turn=0, function="pay_fine", filled=["city"], missing_required=["plate"], state="collecting")
    assert repr(snapshot) == "Snapshot(turn=0, function='pay_fine', state='collecting', filled=['city'], missing=['plate'])"
    binding = HammerEngine(backend=ScriptedBackend([])).bind([{"name": f"t{i}"} for i in range(20)])
    assert repr(binding).startswith("ToolBinding(20 tools: t0, t1") and repr(binding).endswith(", ...; masked=False)")
