"""The in-process prompt cache of many KV states on the real default model (issue 59): a request restores,
among several kept states, the one sharing its longest prefix, and answers as a cold run does; under 50
distinct prompts the kept states stay within the budget, the least recently used evicted first."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from typing import Any

import pytest

from hammer_plugins import HammerEngine, Message
from hammer_plugins.backends.base import GenerationSettings
from hammer_plugins.backends.llama_cpp import LlamaCppBackend
from hammer_plugins.backends.prompt_states import MIB, PromptStates

pytestmark = pytest.mark.real_model

# Three instructions of about 120 tokens each, unlike from their first word, so the three prompts share only
# the tools block that comes before them.
HEADS = {name: " ".join(f"{name} rule {i}: keep answers {word} and cite the {name} handbook." for i, word in
                        enumerate(["short", "exact", "polite", "plain", "checked", "dated", "signed", "calm"]))
         for name in ("Alpha", "Bravo", "Charlie")}


@pytest.fixture(scope="module")
def backend(default_model_path: str) -> Iterator[LlamaCppBackend]:
    backend = LlamaCppBackend(default_model_path, n_ctx=2048, cache_ram=64)  # no disk cache: memory alone
    backend.load()
    yield backend


def _ask(engine: HammerEngine, head: str, question: str, tools: list[Any]) -> Any:
    return engine.generate([Message.system(head), Message.user(question)], tools=tools)


def test_a_request_restores_the_longest_match_among_several_and_answers_as_a_cold_run(
        backend: LlamaCppBackend, demo_tools: list[Any]) -> None:
    engine = HammerEngine(backend=backend, max_tokens=48)
    states = backend.prompt_states
    assert states is not None
    for name in HEADS:  # each request displaces the one before: Alpha's and Bravo's states are kept
        _ask(engine, HEADS[name], "What's the weather in Paris?", demo_tools)
    assert len(states) == 2
    restored_before = states.stats()["restored"]
    warm = _ask(engine, HEADS["Bravo"], "What is 23 * 47?", demo_tools)  # the context holds Charlie's prompt
    assert states.stats()["restored"] == restored_before + 1
    # Bravo's state, not Alpha's (which shares only the tools block, ~580 tokens, and would leave Bravo's ~150
    # tokens of instructions to evaluate): all but the new question was restored.
    assert warm.usage.prompt_tokens - warm.usage.cached_prompt_tokens < 40

    states.clear()
    backend.llama.reset()  # nothing cached: the whole prompt is evaluated
    cold = _ask(engine, HEADS["Bravo"], "What is 23 * 47?", demo_tools)
    assert cold.usage.cached_prompt_tokens == 0
    assert warm.raw == cold.raw and warm.tool_calls  # greedy: the restored state changes nothing


def test_fifty_prompts_stay_within_the_budget_and_the_least_recently_used_goes(
        backend: LlamaCppBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    # Short prompts, so that fifty evaluate in seconds: a state is kept when 8 tokens would be discarded.
    monkeypatch.setattr("hammer_plugins.backends.llama_cpp.prefix.KEEP_MIN_TOKENS", 8)
    budget = 3 * MIB  # about five states of these prompts (12 KiB a token)
    states = backend.prompt_states = PromptStates(budget)
    head = "<|im_start|>system\nYou count things for the user, one number per answer, nothing else.<|im_end|>\n"
    prompts = [f"{head}<|im_start|>user\nHow many letters are in the word number {i} of the list {i * 7919}?"
               f"<|im_end|>\n<|im_start|>assistant\n" for i in range(50)]
    settings = GenerationSettings(max_tokens=1, temperature=0.0)
    prompt_ids = [tuple(backend.tokenize(p)) for p in prompts]

    def index_of(state: Any) -> int:  # the prompt a state was kept for (its tokens, then the answer's)
        return next(i for i, ids in enumerate(prompt_ids) if state.tokens[:len(ids)] == ids)

    try:
        for i, prompt in enumerate(prompts):
            list(backend.stream(prompt, settings))
            if i == 30:  # the oldest kept prompt again: restored, so now the most recently used
                oldest, second = states.entries()[0], states.entries()[1]
                j = index_of(oldest)
                restored = states.stats()["restored"]
                list(backend.stream(prompts[j], settings))
                assert states.stats()["restored"] == restored + 1
            if i == 32:  # two prompts later: the second oldest went, the restored one stayed
                tokens = [s.tokens for s in states.entries()]
                assert oldest.tokens in tokens and second.tokens not in tokens
            assert states.size <= budget
            assert states.size == sum(ctypes.sizeof(s.state) for s in states.entries())  # counted as held
        kept = states.entries()
        assert 3 <= len(kept) <= 6 and states.stats()["evicted"] >= 40
        held = {index_of(s) for s in kept}
        assert held <= set(range(40, 49))  # the newest (49 is in the context); the restored one went later
        assert states.stats()["restored"] >= 1
    finally:
        backend.prompt_states = PromptStates(64 * MIB)
