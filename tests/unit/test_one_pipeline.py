"""One pipeline and one front door: what the old design could not do.

Slot filling runs through the engine's planning and I/O-free core (so it gets the context-window
check, native async and the grammar cache), and both adapters take the very same engine settings.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_hammer import ChatHammer
from llama_index.llms.hammer import HammerLLM

from hammer_plugins import ContextWindowExceededError, EngineSettings, HammerEngine, Message, ScriptedBackend, SlotFiller

PAY = {"name": "pay_fine", "description": "Pay a traffic fine", "parameters": {"type": "object", "properties": {
    "city": {"type": "string", "description": "Violating city"},
    "plate": {"type": "string", "description": "License plate number"}}, "required": ["city", "plate"]}}
PARTIAL = '[{"name": "pay_fine", "arguments": {"city": "Guangzhou"}}]'


def test_a_slot_filling_prompt_over_the_context_window_raises_the_engines_error() -> None:
    engine = HammerEngine(backend=ScriptedBackend([PARTIAL], context_window=300))
    history = [Message.user("Pay my fine in Guangzhou " + "please " * 400)]
    with pytest.raises(ContextWindowExceededError) as info:
        SlotFiller(engine, [PAY]).step(history)
    assert info.value.context_window == 300  # not a silently clamped max_tokens


def test_slot_filling_uses_the_engines_prompt_grammar_cache_and_masking() -> None:
    backend = ScriptedBackend([PARTIAL, PARTIAL])
    engine = HammerEngine(backend=backend)
    filler = SlotFiller(engine, [PAY])
    first = filler.step([Message.user("Pay my fine in Guangzhou")])
    second = filler.step([Message.user("Pay my fine in Guangzhou")])
    assert first.action == second.action == "ask" and first.question == "Please provide the license plate number."
    assert backend.grammars[0] is backend.grammars[1]  # one cached grammar, from the engine's cache
    assert '"required": true' in backend.prompts[0]  # the engine's prompt marks the required slots
    grammar = backend.grammars[0].gbnf  # ... while the grammar lets a partial call through
    assert "t0-args-obj" in grammar and '"\\"plate\\""' in grammar


def test_a_slot_filling_turn_streams_one_answer_through_the_engine() -> None:
    engine = HammerEngine(backend=ScriptedBackend([PARTIAL]))
    events = list(engine.stream([Message.user("Pay my fine in Guangzhou")], [PAY], slot_filling={"ask": "all"}))
    assert len(events) == 1
    final = events[0]
    assert final.slot_filling_action == "ask" and final.text == "Please provide the license plate number."
    assert final.snapshot is not None and final.snapshot.missing_required == ["plate"]


async def test_async_slot_filling_runs_on_the_engines_async_path(loop_ticker: Any) -> None:
    engine = HammerEngine(backend=ScriptedBackend([PARTIAL]))
    async with loop_ticker(0.001):
        step = await SlotFiller(engine, [PAY]).astep([Message.user("Pay my fine in Guangzhou")])
    assert step.action == "ask" and step.snapshot.arguments == {"city": "Guangzhou"}


def test_slot_filling_refuses_a_forced_tool_choice_and_needs_tools() -> None:
    engine = HammerEngine(backend=ScriptedBackend([]))
    with pytest.raises(ValueError, match="tool_choice"):
        engine.generate([Message.user("hi")], [PAY], tool_choice="pay_fine", slot_filling=True)
    with pytest.raises(ValueError, match="needs tools"):
        engine.generate([Message.user("hi")], slot_filling=True)


SETTINGS: dict[str, Any] = {
    "model_path": "m.gguf", "prompt_format": "hammer2.0", "constrained": False, "mask_names": True,
    "on_refusal": "answer", "refusal_text": "No.", "max_tool_rounds": 3, "max_tokens": 64, "temperature": 0.5,
    "top_p": 0.9, "top_k": 40, "repeat_penalty": 1.05, "loop_guard": False, "seed": 7, "n_ctx": 2048,
    "n_threads": 2, "n_gpu_layers": 0, "device": "cpu", "dtype": "float32", "model_kwargs": {"use_mmap": False},
}
SERVER = {"backend": "server", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-x", "timeout": 5.0, "max_retries": 1}


@pytest.mark.parametrize("settings", [SETTINGS, {**SETTINGS, **SERVER, "model_path": None, "model": "hammer"}],
                         ids=["local", "server"])
def test_both_adapters_take_the_same_settings_and_build_the_same_engine(settings: dict[str, Any]) -> None:
    chat, llm = ChatHammer(**settings), HammerLLM(**settings)
    expected = EngineSettings(**settings).engine_options()
    assert chat.engine_options() == llm.engine_options() == expected
    assert chat._engine() is llm.engine  # one engine per configuration, whoever asks
    engine = llm.engine
    assert (engine.prompt_format, engine.mask_names, engine.settings.top_k) == ("hammer2.0", True, 40)


def test_both_adapters_validate_the_same_way() -> None:
    from pydantic import ValidationError

    for adapter in (ChatHammer, HammerLLM):
        for bad in ({"max_tokens": 0}, {"top_p": 1.5}, {"max_tool_rounds": 0}, {"backend": "nope"}):
            with pytest.raises(ValidationError):
                adapter(**bad)


def test_the_engine_settings_are_every_engine_option() -> None:
    import inspect

    engine_params = set(inspect.signature(HammerEngine.__init__).parameters) - {"self", "backend_kwargs"}
    assert engine_params <= set(EngineSettings.model_fields)
