"""Real inference on the embedded default model (Qwen2.5-Coder-0.5B-Instruct GGUF) with llama.cpp.

Greedy decoding, so each answer is reproducible on a given build. The model is the base of
Hammer2.1-0.5b, not Hammer itself: constrained decoding is what makes its calls well-formed.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from hammer_plugins import (
    ContextWindowExceededError,
    HammerEngine,
    HammerResponse,
    Message,
    TextDelta,
    ToolCallDelta,
)

pytestmark = pytest.mark.real_model

CASES = [
    ("What's the weather in Paris?", "get_weather", {"city": "Paris"}),
    ("Email bob@x.com saying hi", "send_email", {"to": "bob@x.com"}),
    ("What is 17 * 23?", "calculate", {"expression": "17 * 23"}),
]


def ask(engine: HammerEngine, question: str, tools: list[Any], **kwargs: Any) -> HammerResponse:
    return engine.generate([Message.user(question)], tools=tools, **kwargs)


@pytest.mark.parametrize(("question", "tool", "expected"), CASES)
@pytest.mark.parametrize("mask_names", [False, True])
def test_questions_that_need_a_tool_get_the_right_call(
    llama_engine: HammerEngine, demo_tools: list[Any], question: str, tool: str, expected: dict[str, str],
    mask_names: bool,
) -> None:
    out = ask(llama_engine, question, demo_tools, mask_names=mask_names)
    assert out.kind == "tool_calls", out.raw
    call = out.tool_calls[0]
    assert call.name == tool
    for key, value in expected.items():
        assert call.arguments[key] == value
    real_params = {t.name: t for t in llama_engine.bind(demo_tools).tools}[tool].properties
    assert set(call.arguments) <= set(real_params)  # real parameter names, also when masked
    assert out.usage.prompt_tokens > 300 and out.usage.completion_tokens > 5
    assert out.finish_reason == "tool_calls" and out.model


def test_unrelated_question_under_auto_is_refused(llama_engine: HammerEngine, demo_tools: list[Any]) -> None:
    out = ask(llama_engine, "Write a poem about the sea", demo_tools)
    assert out.kind == "refusal" and not out.tool_calls
    assert out.text == "Sorry, no tool is suitable for your request."


@pytest.mark.parametrize("question", ["Tell me a joke", "What's the weather in Paris?", "hello"])
def test_a_forced_tool_is_always_called(llama_engine: HammerEngine, demo_tools: list[Any], question: str) -> None:
    for mask_names in (False, True):
        out = ask(llama_engine, question, demo_tools, tool_choice="send_email", mask_names=mask_names)
        assert out.kind == "tool_calls", out.raw
        assert {c.name for c in out.tool_calls} == {"send_email"}
        assert {"to", "subject", "body"} <= set(out.tool_calls[0].arguments)


def test_required_never_refuses(llama_engine: HammerEngine, demo_tools: list[Any]) -> None:
    out = ask(llama_engine, "Write a poem about the sea", demo_tools, tool_choice="required")
    assert out.kind == "tool_calls" and out.tool_calls[0].name in {"get_weather", "send_email", "calculate",
                                                                   "get_current_time"}


def test_none_answers_in_plain_language(llama_engine: HammerEngine, demo_tools: list[Any]) -> None:
    out = ask(llama_engine, "Say hello in French, one word.", demo_tools, tool_choice="none", max_tokens=16)
    assert out.kind == "text" and out.text and not out.tool_calls


def test_refusal_answered_in_prose_by_a_second_pass(llama_engine: HammerEngine, demo_tools: list[Any]) -> None:
    out = ask(llama_engine, "Write a poem about the sea", demo_tools, on_refusal="answer", max_tokens=40)
    assert out.kind == "refusal"
    assert out.text and out.text != "Sorry, no tool is suitable for your request."
    assert "[" not in out.text[:2]


def test_stream_matches_generate(llama_engine: HammerEngine, demo_tools: list[Any]) -> None:
    question = [Message.user("What's the weather in Paris?")]
    events = list(llama_engine.stream(question, tools=demo_tools))
    final = events[-1]
    assert isinstance(final, HammerResponse)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(deltas) > 5 and "".join(d.text for d in deltas) == final.raw
    assert [c.call for c in calls] == final.tool_calls
    plain = llama_engine.generate(question, tools=demo_tools)
    assert [(c.name, c.arguments) for c in plain.tool_calls] == [(c.name, c.arguments) for c in final.tool_calls]


def test_multi_turn_with_a_tool_result(llama_engine: HammerEngine, demo_tools: list[Any]) -> None:
    first = ask(llama_engine, "What is 17 * 23?", demo_tools)
    call = first.tool_calls[0]
    history = [Message.user("What is 17 * 23?"), Message.assistant(tool_calls=[call]),
               Message.tool("391", tool_call_id=call.id, name=call.name)]
    second = llama_engine.generate(history, tools=demo_tools, max_tokens=60)
    # One round of calls per user turn (the default): the model answers from the result, in words.
    assert second.kind == "text" and not second.tool_calls and not second.invalid_tool_calls, second.raw
    assert "391" in second.text


async def test_async_and_concurrent_calls(llama_engine: HammerEngine, demo_tools: list[Any]) -> None:
    questions = [q for q, _, _ in CASES]
    results = await asyncio.gather(*(llama_engine.agenerate([Message.user(q)], tools=demo_tools) for q in questions))
    assert [r.tool_calls[0].name for r in results] == [t for _, t, _ in CASES]


def test_threads_share_one_model_safely(llama_engine: HammerEngine, demo_tools: list[Any]) -> None:
    found: dict[str, str] = {}

    def run(question: str) -> None:
        found[question] = ask(llama_engine, question, demo_tools).tool_calls[0].name

    threads = [threading.Thread(target=run, args=(q,)) for q, _, _ in CASES]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found == {q: t for q, t, _ in CASES}


def test_prompt_over_the_context_window(default_model_path: str, demo_tools: list[Any]) -> None:
    engine = HammerEngine(model_path=default_model_path, n_ctx=512)
    with pytest.raises(ContextWindowExceededError) as info:
        engine.generate([Message.user("weather " * 600)], tools=demo_tools)
    assert info.value.context_window == 512 and info.value.prompt_tokens > 512
    assert "512" in str(info.value) and str(info.value.prompt_tokens) in str(info.value)


def test_unconstrained_output_is_still_parsed(llama_engine: HammerEngine, demo_tools: list[Any]) -> None:
    out = ask(llama_engine, "Email bob@x.com saying hi", demo_tools, constrained=False)
    assert out.kind == "tool_calls" and out.tool_calls[0].name == "send_email"


def test_kv_prefix_is_reused_across_turns(llama_engine: HammerEngine, demo_tools: list[Any]) -> None:
    import llama_cpp

    llama_engine.generate([Message.user("What is 17 * 23?")], tools=demo_tools)
    ctx = llama_engine.backend.llama._ctx.ctx  # type: ignore[attr-defined]
    llama_cpp.llama_perf_context_reset(ctx)
    out = llama_engine.generate([Message.user("What's the weather in Paris?")], tools=demo_tools)
    evaluated = llama_cpp.llama_perf_context(ctx).n_p_eval
    assert out.usage.prompt_tokens > 500
    assert evaluated < 30  # only the new question, not the ~600-token tools block
    assert out.usage.cached_prompt_tokens >= out.usage.prompt_tokens - 30


def test_llguidance_mask_gives_llama_cpps_own_grammar_output(llama_engine: HammerEngine, demo_tools: list[Any]) -> None:
    """The backend's llguidance mask decodes exactly what llama.cpp's own grammar sampler does (greedy).

    Both sides run the same computation, so the comparison is exact on any CPU: one token at a time
    through llama-cpp-python's loop (fast-forward off: its batches give slightly different logits,
    which may flip a near tie inside the free e-mail body, see tests/real/test_fast_forward.py), and
    each from an empty context, so the prompt is evaluated in the same batches.
    """
    import llama_cpp

    from hammer_plugins.grammar.builder import build_grammar

    backend: Any = llama_engine.backend
    llama = backend.llama
    binding = llama_engine.bind(demo_tools)
    grammar = build_grammar(binding.prompt_tools, "auto", True)
    fast_forward = backend.decoder.fast_forward
    try:
        backend.decoder.fast_forward = False
        for question, _, _ in CASES:
            prompt = llama_engine.render([Message.user(question)], demo_tools)
            tokens = llama.tokenize(prompt.encode(), add_bos=False, special=True)
            with backend._lock:
                llama.reset()
                native = llama.create_completion(tokens, max_tokens=96, temperature=0.0, stop=["<|im_end|>"],
                                                 grammar=llama_cpp.LlamaGrammar.from_string(grammar.gbnf,
                                                                                            verbose=False))
                llama.reset()
            ours = ask(llama_engine, question, demo_tools, max_tokens=96)
            assert ours.raw == native["choices"][0]["text"]
            assert ours.finish_reason != "length"  # an end-of-generation token closed the grammar
    finally:
        backend.decoder.fast_forward = fast_forward


def test_every_end_of_generation_token_may_end_a_constrained_answer(llama_engine: HammerEngine) -> None:
    backend: Any = llama_engine.backend
    mask = backend.vocabulary.token_mask('start: "ok"', loop_guard=True)
    mask.consume(backend.llama.tokenize(b"ok", add_bos=False, special=False))
    allowed = mask.allowed(backend.llama.n_vocab())
    ends = {backend.llama.tokenize(t.encode(), add_bos=False, special=True)[0] for t in ("<|im_end|>", "<|endoftext|>")}
    assert all(allowed[t] for t in ends)
