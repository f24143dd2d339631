"""The BFCL multi-turn runner against bfcl-eval's own simulators and checker (no model).

Oracle: replaying each entry's ground-truth calls through the runner must pass bfcl-eval's checker
on every entry of the four categories; agents that do less must fail it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hammer_evals.bfcl.multi_turn import (
    CATEGORIES,
    call_string,
    load_entries,
    parse_call_string,
    replay_agent,
    run_entry,
)


@pytest.fixture(scope="module")
def entries() -> dict[str, list[dict[str, Any]]]:
    return {category: load_entries(category) for category in CATEGORIES}


def test_every_ground_truth_replay_passes_bfcl_evals_checker(entries: dict[str, list[dict[str, Any]]]) -> None:
    for category, rows in entries.items():
        assert len(rows) == 200
        failed = [(r.id, r.error_type) for r in (run_entry(e, replay_agent(e)) for e in rows) if not r.valid]
        assert failed == [], category


def test_an_agent_that_never_calls_fails(entries: dict[str, list[dict[str, Any]]]) -> None:
    for rows in entries.values():
        for entry in rows[:25]:
            result = run_entry(entry, lambda messages, functions: "I cannot help with that.")
            assert not result.valid and result.error_type == "multi_turn:empty_turn_model_response"


def test_an_agent_that_leaves_out_a_call_fails(entries: dict[str, list[dict[str, Any]]]) -> None:
    rows = entries["multi_turn_base"][:40]
    verdicts = []
    for entry in rows:
        replay = replay_agent(entry)

        def lazy(messages: list[dict[str, Any]], functions: list[dict[str, Any]], replay: Any = replay) -> Any:
            answer = replay(messages, functions)
            return answer[:-1] if isinstance(answer, list) and len(answer) > 1 else answer

        verdicts.append(run_entry(entry, lazy).valid)
    assert verdicts.count(False) >= 30  # a missing call changes the state or a response in most entries


def test_held_back_functions_arrive_at_their_turn(entries: dict[str, list[dict[str, Any]]]) -> None:
    for entry in entries["multi_turn_miss_func"][:30]:
        held = {turn: [f["name"] for f in docs] for turn, docs in entry["missed_function"].items()}
        seen: list[tuple[int, set[str], str]] = []
        replay = replay_agent(entry)

        def spy(messages: list[dict[str, Any]], functions: list[dict[str, Any]], replay: Any = replay,
                seen: list[Any] = seen) -> Any:
            users = [m for m in messages if m["role"] == "user"]
            seen.append((len(users) - 1, {f["name"] for f in functions}, users[-1]["content"]))
            return replay(messages, functions)

        assert run_entry(entry, spy).valid
        for turn, names in held.items():
            before = [s for s in seen if s[0] < int(turn)]
            after = [s for s in seen if s[0] >= int(turn)]
            assert all(not set(names) & s[1] for s in before) and all(set(names) <= s[1] for s in after)


scalar = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
literal = st.recursive(scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                        max_size=3), max_leaves=6)


@given(name=st.from_regex(r"[a-z_][a-z0-9_]{0,10}", fullmatch=True),
       arguments=st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True), literal, max_size=4))
def test_call_strings_round_trip(name: str, arguments: dict[str, Any]) -> None:
    import keyword

    if keyword.iskeyword(name) or any(keyword.iskeyword(k) for k in arguments):
        return
    assert parse_call_string(call_string({"name": name, "arguments": arguments})) == {"name": name,
                                                                                       "arguments": arguments}


def test_skip_and_limit_take_a_later_slice_of_each_category(entries: dict[str, list[dict[str, Any]]]) -> None:
    for category, rows in entries.items():
        assert [e["id"] for e in load_entries(category, 2, skip=3)] == [e["id"] for e in rows[3:5]]
        assert [e["id"] for e in load_entries(category, None, skip=198)] == [e["id"] for e in rows[198:]]


def test_the_chat_hammer_agent_gives_an_ask_s_held_call_back_on_the_next_turn() -> None:
    """Under on_missing="ask" the agent's answer is text; the loop keeps only the text, so the agent must give
    the held-back call back on that message for the next user turn to complete it (the city given earlier)."""
    from langchain_hammer import ChatHammer

    from hammer_evals.bfcl.multi_turn import chat_hammer_agent
    from hammer_plugins import ScriptedBackend

    functions = [{"name": "pay_fine", "description": "Pay a fine", "parameters": {"type": "dict", "properties": {
        "city": {"type": "string", "description": "Violating city"},
        "plate": {"type": "string", "description": "License plate number"}}, "required": ["city", "plate"]}}]
    llm = ChatHammer(backend=ScriptedBackend(['[{"name": "pay_fine", "arguments": {"city": "Oslo", "plate": "X1"}}]',
                                              '[{"name": "pay_fine", "arguments": {"plate": "D456"}}]']),
                     on_missing="ask")
    agent = chat_hammer_agent(llm)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Pay my fine in Oslo"}]
    asked = agent(messages, functions)
    assert asked == "Please provide the license plate number."
    messages += [{"role": "assistant", "content": asked}, {"role": "user", "content": "D456"}]
    assert agent(messages, functions) == [{"name": "pay_fine", "arguments": {"city": "Oslo", "plate": "D456"}}]
