"""The snapshot and evaluation plumbing on the real default model (llama.cpp, greedy).

The stand-in (Qwen2.5-Coder-0.5B-Instruct, the base of Hammer2.1-0.5b, not Hammer) is weak at
slot filling, so these tests check what must hold whatever it answers: a call to an offered tool
with schema names only (constrained decoding), the rules' verdicts consistent with the call, the
state recorded and recovered, and an end-to-end evaluation writing its reports. About 6 model calls.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hammer_evals.datasets import read_json
from hammer_evals.hammerbench import evaluate, fix_tool_schema
from hammer_plugins import HammerEngine, Message
from hammer_plugins.slot_filling.filler import SlotFiller
from hammer_plugins.slot_filling.snapshots import dump_history, load_history

# Longer than the suite's 300 s: the evaluation end to end took 144 s on CI's fresh machine.
pytestmark = [pytest.mark.real_model, pytest.mark.timeout(600)]


def test_slot_filling_turns_on_a_hammerbench_conversation(llama_engine: HammerEngine, hb_data: Path) -> None:
    data = read_json(hb_data / "multi-turn" / "HammerBench_Based.json")[3]
    tools = [fix_tool_schema(t) for t in data["multiple_tools"]]
    schemas = {t["name"]: t["parameters"] for t in tools}
    filler = SlotFiller(llama_engine, tools)
    history: list[Message] = []
    for text in ["How to pay traffic violation fines online?", "The violation occurred in Guangzhou."]:
        history.append(Message.user(text))
        step = filler.step(history)
        snap = step.snapshot
        assert step.response is not None and step.response.usage.prompt_tokens > 300
        if snap.function is None:
            assert step.action in ("none", "terminate") and step.message.content
        else:
            schema = schemas[snap.function]
            assert snap.hallucinated == [] and set(snap.arguments) <= set(schema["properties"])
            assert snap.missing_required == [k for k in schema["required"] if k not in snap.arguments]
            if snap.missing_required:
                assert step.action == "ask" and step.question and step.message.content == step.question
            else:
                assert step.action == "execute" and step.call is not None and step.message.tool_calls == [step.call]
        history.append(step.message)
    restored = load_history(json.loads(json.dumps(dump_history(history))))
    assert SlotFiller.rebuild(restored) == SlotFiller.rebuild(history)
    assert [s.turn for s in SlotFiller.rebuild(history).snapshots] == [0, 1]


def test_half_given_information_gets_a_follow_up_question(llama_engine: HammerEngine) -> None:
    tool = {"name": "pay_fine", "description": "Pay a traffic violation fine", "parameters": {"type": "object",
            "properties": {"city": {"type": "string", "description": "Violating city"},
                           "plate_number": {"type": "string", "description": "License plate number"},
                           "time": {"type": "string", "description": "Billing time"}},
            "required": ["city", "plate_number", "time"]}}
    # The stand-in invents a plate number and a date; the grounding rule turns them into a question.
    filler = SlotFiller(llama_engine, [tool], grounding="enforce")
    step = filler.step([Message.user("Pay my traffic fine from Guangzhou.")])
    assert step.snapshot.output_kind == "tool_calls", step.snapshot.raw  # the model did emit a call
    assert step.snapshot.function == "pay_fine"
    assert step.snapshot.arguments == {"city": "Guangzhou"}
    assert step.action == "ask" and step.question == "Please provide the license plate number."


def test_small_real_evaluation_end_to_end(llama_engine: HammerEngine, hb_data: Path, tmp_path: Path) -> None:
    result = evaluate(hb_data, engine=llama_engine, files=["ST_Perfect", "ir_ST_Perfect"], limit=1,
                      output_dir=tmp_path, progress=False, name="stand-in")
    assert set(result.per_type) == {"Perfect", "Irrelevant"} and result.overall is not None
    timing = result.timing
    assert timing is not None and timing.snapshots == 2 and timing.seconds_per_snapshot is not None
    assert timing.seconds_per_snapshot > 0 and timing.estimated_full_seconds is not None
    assert timing.full_snapshots == 200
    lines = (tmp_path / "predictions.jsonl").read_text().splitlines()
    details = [json.loads(line)["details"][0] for line in lines]
    assert all(d["raw"] and d["prompt_tokens"] > 300 for d in details)
    assert (tmp_path / "accuracy.png").stat().st_size > 5000 and "| stand-in |" in (tmp_path / "table.md").read_text()


async def test_async_slot_filling_matches_the_sync_step_and_leaves_the_loop_free(llama_engine: HammerEngine,
                                                                                  loop_ticker: Any) -> None:
    tool = {"name": "pay_fine", "description": "Pay a traffic violation fine", "parameters": {"type": "object",
            "properties": {"city": {"type": "string", "description": "Violating city"},
                           "plate_number": {"type": "string", "description": "License plate number"}},
            "required": ["city", "plate_number"]}}
    filler = SlotFiller(llama_engine, [tool])
    history = [Message.user("Pay my traffic fine from Guangzhou.")]
    sync = filler.step(history)
    async with loop_ticker(0.01) as ticker:
        step = await filler.astep(history)
    assert (step.action, step.snapshot.function, step.snapshot.arguments) == (
        sync.action, sync.snapshot.function, sync.snapshot.arguments)
    assert ticker.ticks >= 5  # the model ran off the event loop


@pytest.mark.timeout(900)  # its process has 900 s; 358 s on CI's fresh machine with two conversations a file
def test_the_cli_runs_on_the_shipped_data_with_no_data_folder(tmp_path: Path) -> None:
    """``hammer eval hammerbench --limit`` on a fresh install: no --data, the copy inside the package. One
    conversation a file: that is the proof (it was 2, 358 s on CI's fresh machine; scoring is checked
    above and in tests/evals/hammerbench without a model)."""
    out = tmp_path / "results"
    command = [sys.executable, "-m", "hammer_plugins.cli", "eval", "hammerbench", "--files", "IS", "ST_Perfect",
               "--limit", "1", "--threads", "2", "--no-progress", "--output", str(out)]
    env = {k: v for k, v in os.environ.items() if k != "HAMMERBENCH_DATA"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    assert set(results["per_type"]) == {"IS", "Perfect"}, results
    assert len((out / "predictions.jsonl").read_text().splitlines()) == 2
