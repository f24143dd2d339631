"""Shadow tools against the selection (the red team's attack): look-alikes of a trusted tool, listed after it as a
third-party MCP server's would be, and a keyword-stuffed tool, on a realistic agent tool set over the budget.

The oracle is the clean tool set: a fitting tool the selection offers there it must still offer with the shadows
beside it, and no look-alike or stuffed tool may be offered. Red with the look-alike rule undone (the shadows took
places for every question, and three questions got only shadows), and with the share rule undone in the words-only
selector (the stuffed tool joined 12 of 24 offers; 1 with the rule)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hammer_plugins import HammerEngine, Message, ScriptedBackend
from hammer_plugins.engine.planning import make_plan
from hammer_plugins.engine.request import EngineRequest
from hammer_plugins.tools import to_tool
from hammer_plugins.tools.look_alikes import LookAlikes
from hammer_plugins.tools.ranking import MAX_TERM_REPEATS, ToolRanking, tool_words

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("shadow_tools_bench", ROOT / "benchmarks" / "shadow_tools.py")
assert _spec is not None and _spec.loader is not None
shadow = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(shadow)
DATA = shadow.load()


def offered(engine: HammerEngine, question: str, tools: list[dict]) -> tuple[str, ...]:
    plan = make_plan(engine, EngineRequest.of([Message.user(question)], tools), fit=False)
    assert plan.offered is not None, "the tool set must be over the budget, or nothing is selected"
    return plan.offered


@pytest.mark.parametrize(("selector", "stuffed_at_most"), [("meaning", 0), ("bm25", 1)])
def test_look_alikes_and_stuffed_tools_never_take_a_real_tools_place(selector: str, stuffed_at_most: int) -> None:
    engine = HammerEngine(backend=ScriptedBackend([]), tool_selector=selector)
    stuffed = 0
    for question in DATA["questions"]:
        sets = shadow.tool_sets(DATA, question)
        clean = offered(engine, question["question"], sets["clean"])
        for label in ("target shadowed", "every tool shadowed", "stuffed"):
            got = offered(engine, question["question"], sets[label])
            copies = [n for n in got if shadow.is_shadow(n)]
            assert not copies, f"{label}: {question['question']!r} was offered {copies}"
            stuffed += DATA["stuffed"]["name"] in got
            if question["tool"] in clean:
                assert question["tool"] in got, f"{label}: {question['question']!r} lost its tool"
    assert stuffed <= stuffed_at_most  # of 24 questions; 12 by words before the share rule


def test_the_meaning_selector_offers_the_fitting_tool_with_or_without_shadows() -> None:
    engine = HammerEngine(backend=ScriptedBackend([]))
    served = {label: 0 for label in ("clean", "every tool shadowed")}
    for question in DATA["questions"]:
        sets = shadow.tool_sets(DATA, question)
        for label in served:
            served[label] += question["tool"] in offered(engine, question["question"], sets[label])
    assert served["clean"] == served["every tool shadowed"] >= 22  # of 24; measured 23


def test_a_look_alike_left_out_stays_reachable_in_the_reserve() -> None:
    from hammer_plugins.tools.meaning import MeaningSelector
    from hammer_plugins.tools.selector import SelectionQuery

    question = DATA["questions"][0]
    tools = [to_tool(t) for t in shadow.tool_sets(DATA, question)["target shadowed"]]
    selection = MeaningSelector(store=None).select(SelectionQuery(question["question"]), tools)
    assert question["tool"] in selection.offered
    assert {question["tool"] + s for s in shadow.SUFFIXES} & set(selection.reserve)


WORDS = ["weather", "forecast", "city", "email", "send", "stock", "price", "flight", "book", "hotel", "room",
         "rate", "file", "disk", "read", "translate", "currency", "timer"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=4, max_size=12, unique=True), st.integers(1, 4),
       st.lists(st.sampled_from(WORDS), max_size=6))
def test_a_description_copied_with_words_added_is_a_look_alike_of_the_first(original: list[str], repeats: int,
                                                                            added: list[str]) -> None:
    first = " ".join(original)
    copy = " ".join([first, *added, *original * repeats])
    tools = [to_tool({"name": "real", "description": first}), to_tool({"name": "copy", "description": copy})]
    found = LookAlikes(tools)
    assert found.original(1) == 0
    assert found.original(0) is None  # a tool copies only what came before it
    reversed_tools = [to_tool({"name": "a", "description": first}),
                      to_tool({"name": "b", "description": " ".join(reversed(original))})]
    assert LookAlikes(reversed_tools).original(1) is None  # the same words in another order say something else


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), st.integers(2, 20))
def test_repeating_a_descriptions_words_raises_its_score_no_further(description: list[str], times: int) -> None:
    others = [to_tool({"name": f"other_{i}", "description": w}) for i, w in enumerate(WORDS)]
    twice = to_tool({"name": "tool", "description": " ".join(description * MAX_TERM_REPEATS)})
    stuffed = to_tool({"name": "tool", "description": " ".join(description * times)})
    assert max(tool_words(stuffed).count(w) for w in set(tool_words(stuffed))) <= MAX_TERM_REPEATS
    query = " ".join(description)
    assert ToolRanking([stuffed, *others]).scores(query) == pytest.approx(ToolRanking([twice, *others]).scores(query))
