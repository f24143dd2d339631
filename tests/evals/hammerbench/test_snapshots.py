"""SlotFiller on HammerBench conversations, with a scripted backend replaying the labelled snapshots.

Each test walks a real HammerBench conversation turn by turn: the backend answers with the
labelled snapshot (as Hammer prints it), the filler's rules decide, and its message goes into the
history. What is checked is what an assistant built on it would rely on: the state, the question,
the executable call, overrides, intent shifts, and the history surviving a JSON round trip.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hammer_evals.datasets import read_json
from hammer_evals.hammerbench import fix_tool_schema
from hammer_plugins import HammerEngine, Message, ToolCall
from hammer_plugins.backends.scripted import ScriptedBackend
from hammer_plugins.slot_filling.filler import SlotFiller, SlotFillingStep
from hammer_plugins.slot_filling.snapshots import (
    SNAPSHOT_HINT,
    ConversationState,
    Snapshot,
    SnapshotMessage,
    dump_history,
    follow_up_question,
    load_history,
    snapshot_of,
)
from hammer_plugins.tools.definition import Tool

GOLD = "Navigation.TrafficViolations.payViolations"
PLATE_Q = "Please provide the license plate number."


def record(hb_data: Path, stem: str, index: int = 3) -> dict[str, Any]:
    data = read_json(hb_data / "multi-turn" / f"{stem}.json")[index]
    data["multiple_tools"] = [fix_tool_schema(t) for t in data["multiple_tools"]]   # "float" -> "number"
    return dict(data)


def fenced(name: str, arguments: dict[str, Any]) -> str:
    return "```\n" + json.dumps([{"name": name, "arguments": arguments}], ensure_ascii=False) + "\n```"


class Replay:
    """A scripted backend whose answers the test queues turn by turn; it records every prompt."""

    def __init__(self) -> None:
        self.queue: list[str] = []
        self.backend = ScriptedBackend(responder=self._answer)
        self.engine = HammerEngine(backend=self.backend)

    def _answer(self, prompt: str) -> str:
        assert self.queue, "the filler asked the model more often than the test expected"
        return self.queue.pop(0)

    def tools_shown(self, prompt_index: int) -> list[str]:
        prompt = self.backend.prompts[prompt_index]
        start = prompt.index("[BEGIN OF AVAILABLE TOOLS]\n") + len("[BEGIN OF AVAILABLE TOOLS]\n")
        return [t["name"] for t in json.loads(prompt[start:prompt.index("\n[END OF AVAILABLE TOOLS]")])]


def walk(filler: SlotFiller, replay: Replay, data: dict[str, Any],
         answer: Callable[[int, dict[str, Any]], list[str]] | None = None) -> tuple[list[Message], list[SlotFillingStep]]:
    """Play the record's user turns; the model answers each with its labelled snapshot (or ``answer``)."""
    history: list[Message] = []
    steps: list[SlotFillingStep] = []
    users = [m["content"] for m in data["messages"] if m["role"] == "user"]
    following = [data["messages"][i + 1] if i + 1 < len(data["messages"]) else None
                 for i, m in enumerate(data["messages"]) if m["role"] == "user"]
    for turn, (text, label) in enumerate(zip(users, following, strict=True)):
        history.append(Message.user(text))
        if answer is not None:
            replay.queue.extend(answer(turn, label or {}))
        elif label is not None and label["role"] == "function call":
            replay.queue.append(fenced(label["content"]["name"], label["content"]["arguments"]))
        else:
            replay.queue.extend(["[]", "[]"])
        step = filler.step(history)
        steps.append(step)
        history.append(step.message)
        if step.action == "execute":
            assert step.call is not None
            history.append(Message.tool("success", tool_call_id=step.call.id, name=step.call.name))
    assert not replay.queue, "scripted answers left over"
    return history, steps


def test_collecting_until_ready_then_executed(hb_data: Path) -> None:
    data = record(hb_data, "HammerBench_Based")                   # payViolations, 3 required slots
    replay = Replay()
    filler = SlotFiller(replay.engine, data["multiple_tools"])
    history, steps = walk(filler, replay, data)
    assert [s.action for s in steps] == ["ask", "ask", "ask", "execute"]
    assert [s.snapshot.state for s in steps] == ["collecting", "collecting", "collecting", "ready"]
    assert [s.snapshot.missing_required for s in steps[:3]] == [
        ["plate_number", "city", "time"], ["plate_number", "time"], ["time"]]
    assert [s.question for s in steps[:3]] == [PLATE_Q, PLATE_Q, "Please provide the billing time."]
    assert steps[1].snapshot.added == ["city"] and steps[2].snapshot.added == ["plate_number"]
    assert steps[3].call is not None and steps[3].call.name == GOLD
    assert steps[3].call.arguments == {"plate_number": "Yue B88888", "city": "Guangzhou", "time": "March 15, 2023"}
    assert steps[3].message.tool_calls == [steps[3].call]
    # Turn 0 offers every tool; once a call is being filled only that tool is shown.
    assert len(replay.tools_shown(0)) == 5 and replay.tools_shown(1) == [GOLD]
    state = SlotFiller.rebuild(history)
    assert state.state == "executed" and state.executed == [steps[3].call] and state.user_turns == 4
    assert [s.turn for s in state.snapshots] == [0, 1, 2, 3]
    # The hint is shown by default, in the engine's chat layout.
    assert SNAPSHOT_HINT in replay.backend.prompts[0]
    assert "<|im_start|>user\nThe violation occurred in Guangzhou.<|im_end|>" in replay.backend.prompts[1]


def test_ask_for_all_missing_slots(hb_data: Path) -> None:
    data = record(hb_data, "HammerBench_Based")
    replay = Replay()
    _, steps = walk(SlotFiller(replay.engine, data["multiple_tools"], ask="all"), replay, data)
    assert steps[0].question == "Please provide the license plate number, the violating city and the billing time."
    assert steps[1].question == "Please provide the license plate number and the billing time."
    custom = SlotFiller(replay.engine, data["multiple_tools"], question_builder=lambda tool, missing: f"{tool.name}?{missing}")
    replay.queue.append(fenced(GOLD, {}))
    assert custom.step([Message.user("pay")]).question == f"{GOLD}?['plate_number', 'city', 'time']"


def test_slot_overriding_before_execution(hb_data: Path) -> None:
    data = record(hb_data, "HammerBench_SO_case2")                # turn 2: "It was wrong before ... Hangzhou"
    replay = Replay()
    _, steps = walk(SlotFiller(replay.engine, data["multiple_tools"]), replay, data)
    override = steps[2].snapshot
    assert [c.model_dump() for c in override.changed] == [{"name": "city", "old": "Guangzhou", "new": "Hangzhou"}]
    assert override.state == "collecting" and not override.after_execution
    assert steps[-1].call is not None and steps[-1].call.arguments["city"] == "Hangzhou"
    assert all(not s.snapshot.changed for i, s in enumerate(steps) if i != 2)


def test_new_value_after_execution_keeps_the_other_slots(hb_data: Path) -> None:
    data = record(hb_data, "HammerBench_mSv")                     # executed, then "... plate number is Su D44444"
    replay = Replay()

    def only_the_new_slot(turn: int, label: dict[str, Any]) -> list[str]:
        args = label["content"]["arguments"]
        # A small model often re-emits only what the user just said; carry-over fills the rest.
        return [fenced(GOLD, {"plate_number": "Su D44444"})] if turn == 4 else [fenced(GOLD, args)]

    history, steps = walk(SlotFiller(replay.engine, data["multiple_tools"]), replay, data, only_the_new_slot)
    assert [s.action for s in steps] == ["ask", "ask", "ask", "execute", "execute"]
    again = steps[4].snapshot
    assert again.after_execution and again.state == "ready"
    assert again.carried == ["city", "time"] and again.model_arguments == {"plate_number": "Su D44444"}
    assert [(c.name, c.old, c.new) for c in again.changed] == [("plate_number", "Yue B88888", "Su D44444")]
    assert steps[4].call is not None and steps[4].call.arguments == {
        "plate_number": "Su D44444", "city": "Guangzhou", "time": "March 15, 2023"}
    assert replay.tools_shown(4) == [GOLD]                          # still focused after execution
    assert [c.arguments["plate_number"] for c in SlotFiller.rebuild(history).executed] == ["Yue B88888", "Su D44444"]


def test_without_carry_over_the_snapshot_is_the_models(hb_data: Path) -> None:
    data = record(hb_data, "HammerBench_Based")
    replay = Replay()
    filler = SlotFiller(replay.engine, data["multiple_tools"], carry_over=False)
    replay.queue += [fenced(GOLD, {"city": "Guangzhou"}), fenced(GOLD, {"plate_number": "Yue B88888"})]
    history: list[Message] = [Message.user("Pay my fine in Guangzhou")]
    history.append(filler.step(history).message)
    history.append(Message.user("Plate Yue B88888"))
    snap = filler.step(history).snapshot
    assert snap.arguments == {"plate_number": "Yue B88888"} and snap.missing_required == ["city", "time"]
    assert snap.carried == []


def test_intent_shift_terminates(hb_data: Path) -> None:
    data = record(hb_data, "HammerBench_IS")                      # last turn: "Oh no, Recommend me a ... destination"
    replay = Replay()
    history, steps = walk(SlotFiller(replay.engine, data["multiple_tools"]), replay, data)
    last = steps[-1]
    assert last.action == "terminate" and last.snapshot.state == "terminated"
    assert last.snapshot.shift is not None and last.snapshot.shift.model_dump() == {
        "kind": "abandon", "from_function": GOLD, "to_function": None}
    assert last.message.content == "Sorry, no tool is suitable for your request."
    # "[]" with only the current tool shown, then a second pass with every tool.
    assert replay.tools_shown(-2) == [GOLD] and len(replay.tools_shown(-1)) == 5
    assert SlotFiller.rebuild(history).state == "terminated"
    # After termination nothing is in progress: a further "[]" is plain chat, not another shift.
    history.append(Message.user("Thanks, bye"))
    replay.queue.append("[]")
    bye = SlotFiller(replay.engine, data["multiple_tools"]).step(history)
    assert bye.action == "none" and bye.snapshot.state == "idle" and bye.snapshot.shift is None


def test_switch_to_another_function(hb_data: Path) -> None:
    data = record(hb_data, "HammerBench_IS")
    other = "ConvenientLiving.UtilityPayments.payBill"
    replay = Replay()

    def switch_at_the_end(turn: int, label: dict[str, Any]) -> list[str]:
        if label.get("role") == "function call":
            return [fenced(label["content"]["name"], label["content"]["arguments"])]
        return ["[]", fenced(other, {})]

    _, steps = walk(SlotFiller(replay.engine, data["multiple_tools"]), replay, data, switch_at_the_end)
    snap = steps[-1].snapshot
    assert snap.function == other and snap.shift is not None
    assert (snap.shift.kind, snap.shift.from_function, snap.shift.to_function) == ("switch", GOLD, other)
    assert steps[-1].action in ("ask", "execute") and snap.added == list(snap.arguments)


def test_malformed_output_keeps_the_task(hb_data: Path) -> None:
    data = record(hb_data, "HammerBench_Based")
    replay = Replay()
    filler = SlotFiller(replay.engine, data["multiple_tools"])
    replay.queue += [fenced(GOLD, {"city": "Guangzhou"}), '[{"name": "' + GOLD + '", "arguments": {"plate']
    history: list[Message] = [Message.user("Pay my Guangzhou fine")]
    history.append(filler.step(history).message)
    history.append(Message.user("Yue B88888"))
    step = filler.step(history)
    assert step.action == "ask" and step.snapshot.output_kind == "invalid"
    assert step.snapshot.arguments == {"city": "Guangzhou"} and step.question == PLATE_Q


def test_invented_values_are_flagged_and_with_enforce_asked_for(hb_data: Path) -> None:
    data = record(hb_data, "HammerBench_Based")
    invented = [fenced(GOLD, {"city": "Guangzhou", "plate_number": "1234567890", "time": "2023-04-15"})]
    for grounding, action, missing in [("report", "execute", []), ("enforce", "ask", ["plate_number", "time"])]:
        replay = Replay()
        replay.queue += invented * 2
        filler = SlotFiller(replay.engine, data["multiple_tools"], grounding=grounding)  # type: ignore[arg-type]
        history = [Message.user("How to pay traffic violation fines online?"), Message.assistant("Which city?"),
                   Message.user("The violation occurred in Guangzhou.")]
        step = filler.step(history)
        assert step.snapshot.ungrounded == ["plate_number", "time"]
        assert (step.action, step.snapshot.missing_required) == (action, missing)
        if grounding == "enforce":
            assert step.snapshot.arguments == {"city": "Guangzhou"} and step.question == PLATE_Q
            # Once the user gives the plate, the same value is supported and accepted.
            history += [step.message, Message.user("It is 1234567890.")]
            later = filler.step(history).snapshot
            assert later.ungrounded == ["time"] and later.arguments == {"plate_number": "1234567890", "city": "Guangzhou"}


def test_hallucinated_names_are_reported_and_kept_out_of_the_call() -> None:
    tool = {"name": "pay", "description": "Pay a fine", "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "Violating city"}}, "required": ["city"]}}
    replay = Replay()
    replay.engine = HammerEngine(backend=replay.backend, constrained=False)   # only unconstrained output can do this
    replay.queue.append(fenced("pay", {"city": "Paris", "color": "red", "note": ""}))
    step = SlotFiller(replay.engine, [tool]).step([Message.user("pay in Paris")])
    assert step.snapshot.hallucinated == ["color"] and step.call is not None
    assert step.call.arguments == {"city": "Paris"}


def test_history_survives_a_restart(hb_data: Path) -> None:
    data = record(hb_data, "HammerBench_mSv")
    replay = Replay()
    filler = SlotFiller(replay.engine, data["multiple_tools"])
    history, steps = walk(filler, replay, data)
    stored = json.dumps(dump_history(history))                    # e.g. a checkpointer's JSON
    restored = load_history(json.loads(stored))
    assert SlotFiller.rebuild(restored) == SlotFiller.rebuild(history)
    assert [snapshot_of(m) for m in restored] == [snapshot_of(m) for m in history]
    assert isinstance(restored[1], SnapshotMessage) and restored[1].snapshot == steps[0].snapshot
    # A new filler (a new process) continues from the restored history exactly as the old one would.
    for h in (history, restored):
        replay.queue.append(fenced(GOLD, {"plate_number": "Su D44444", "city": "Shenzhen", "time": "March 15, 2023"}))
        h.append(Message.user("Actually make it Shenzhen"))
    before = filler.step(history).snapshot
    after = SlotFiller(replay.engine, data["multiple_tools"]).step(restored).snapshot
    assert before.model_dump(exclude={"raw"}) == after.model_dump(exclude={"raw"})
    assert [(c.name, c.old, c.new) for c in after.changed] == [("city", "Guangzhou", "Shenzhen")]


def test_state_from_a_history_without_metadata() -> None:
    """Frameworks that drop metadata still keep tool calls and results: executed is re-derived."""
    call = ToolCall(name="pay", arguments={"city": "Paris", "plate": ""})
    history = [Message.user("pay"), Message.assistant("Which city?"), Message.user("Paris"),
               Message.assistant(tool_calls=[call])]
    state = SlotFiller.rebuild(history)
    assert state.state == "ready" and state.pending == [call] and state.arguments == {"city": "Paris"}
    history.append(Message.tool("ok", tool_call_id=call.id, name="pay"))
    state = SlotFiller.rebuild(history)
    assert state.state == "executed" and state.executed == [call] and state.pending == []
    as_dicts = [{"role": "user", "content": "pay"},
                {"role": "assistant", "content": "Which city?",
                 "response_metadata": {"hammer_snapshot": Snapshot(turn=0, function="pay", state="collecting",
                                                                   missing_required=["city"]).model_dump()}}]
    assert SlotFiller.rebuild(as_dicts).state == "collecting"
    assert ConversationState.model_validate_json(state.model_dump_json()) == state


def test_snapshot_json_round_trip_and_errors() -> None:
    snap = Snapshot(turn=2, function="pay", arguments={"city": "Paris", "n": 2}, missing_required=["plate"],
                    state="collecting", question="Please provide the plate.")
    assert Snapshot.from_metadata(json.loads(json.dumps(snap.to_metadata()))) == snap
    assert Snapshot.from_metadata({"hammer_snapshot": snap.model_dump_json()}) == snap
    assert Snapshot.from_metadata({}) is None and not snap.complete
    engine = HammerEngine(backend=ScriptedBackend())
    with pytest.raises(ValueError, match="no user message"):
        SlotFiller(engine, [{"name": "f", "parameters": {}}]).step([])
    with pytest.raises(ValueError, match="at least one tool"):
        SlotFiller(engine, [])
    tool = Tool(name="f", parameters={"type": "object", "properties": {"startDate": {"type": "string"}}})
    assert follow_up_question(tool, ["startDate"]) == "Please provide the start date."
