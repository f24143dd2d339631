"""The on-disk prefix cache on the real default model: a new process (here: a new llama.cpp context)
with the same model and tools loads the tools prefix instead of evaluating it, and answers exactly
as the run that stored it; anything that could make the state stale makes it miss instead."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hammer_plugins import HammerEngine, Message, Usage
from hammer_plugins.backends.llama_cpp import LlamaCppBackend
from hammer_plugins.backends.prefix_cache import PrefixCache

pytestmark = pytest.mark.real_model

QUESTIONS = [
    "What's the weather in Paris?",
    "What is 23 * 47?",
    "Email bob@example.com that the meeting moved to 3pm.",
    "Weather in Rome and Oslo, in fahrenheit",
]


def _answers(backend: LlamaCppBackend, tools: list[Any]) -> list[tuple[str, Usage]]:
    engine = HammerEngine(backend=backend, max_tokens=96)
    out = []
    for question in QUESTIONS:
        response = engine.generate([Message.user(question)], tools=tools)
        out.append((response.raw, response.usage))
    return out


@pytest.fixture(scope="module")
def cold_and_warm(default_model_path: str, demo_tools: list[Any], tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("kv")
    cold = _answers(LlamaCppBackend(default_model_path, n_ctx=4096, prefix_cache=directory), demo_tools)
    warm_backend = LlamaCppBackend(default_model_path, n_ctx=4096, prefix_cache=directory)
    warm = _answers(warm_backend, demo_tools)
    return directory, cold, warm, warm_backend


def test_a_new_context_loads_the_prefix_and_answers_identically(cold_and_warm) -> None:
    directory, cold, warm, _ = cold_and_warm
    assert [raw for raw, _ in warm] == [raw for raw, _ in cold]
    assert cold[0][1].disk_cached_prompt_tokens == 0  # the first call stored it
    # Issue 60, item 10: on an empty cache folder the first request evaluated its prefix; nothing was loaded or
    # reused, so nothing is reported cached (it reported the shared head's length, 186 of 195, before).
    assert cold[0][1].cached_prompt_tokens == 0
    assert warm[0][1].disk_cached_prompt_tokens > 500  # the new context loaded it: ~580 tokens
    assert warm[0][1].cached_prompt_tokens >= warm[0][1].disk_cached_prompt_tokens  # what was loaded is counted
    # Later calls in one context reuse the prefix in memory, as without the disk cache.
    assert all(usage.cached_prompt_tokens > 500 for _, usage in warm[1:])
    assert len(list(Path(directory).glob("*.kv"))) == 1  # one prefix state
    assert len(list((Path(directory) / "vocabularies").glob("*.kv"))) == 1  # and the tokenizer's vocabulary


def test_other_tools_or_another_runtime_miss(cold_and_warm, default_model_path: str, demo_tools: list[Any]) -> None:
    directory, cold, _, _ = cold_and_warm
    other_tools = _answers(LlamaCppBackend(default_model_path, n_ctx=4096, prefix_cache=directory), demo_tools[:2])
    assert other_tools[0][1].disk_cached_prompt_tokens == 0
    other_runtime = LlamaCppBackend(default_model_path, n_ctx=2048, prefix_cache=directory)  # another KV layout
    engine = HammerEngine(backend=other_runtime, max_tokens=96)
    response = engine.generate([Message.user(QUESTIONS[0])], tools=demo_tools)
    assert response.usage.disk_cached_prompt_tokens == 0 and response.raw == cold[0][0]


def test_a_damaged_state_is_evaluated_again(cold_and_warm, default_model_path: str, demo_tools: list[Any]) -> None:
    directory, cold, _, _ = cold_and_warm
    cache = PrefixCache(directory)
    # Every stored state: the tools prefixes, and the whole prompts kept for a restart (prompts/); not the
    # vocabularies, which are no state.
    for path in [p for p in Path(directory).rglob("*.kv") if "vocabularies" not in p.parts]:
        blob = bytearray(path.read_bytes())
        blob[len(blob) // 2] ^= 0xFF
        path.write_bytes(bytes(blob))
    backend = LlamaCppBackend(default_model_path, n_ctx=4096, prefix_cache=cache)
    response = HammerEngine(backend=backend, max_tokens=96).generate([Message.user(QUESTIONS[0])], tools=demo_tools)
    assert response.usage.disk_cached_prompt_tokens == 0 and response.raw == cold[0][0]


def test_a_new_tool_set_on_a_known_model_reads_no_vocabulary(default_model_path: str, demo_tools: list[Any],
                                                             tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The states are cleared (as for tools never seen); the vocabulary comes from the store, so llama.cpp
    is never asked for a token's text. With the store empty too, it is (the check can fail)."""
    import llama_cpp

    from hammer_plugins.grammar.builder import build_json_grammar

    directory = tmp_path / "kv"
    first = HammerEngine(backend=LlamaCppBackend(default_model_path, n_ctx=4096, prefix_cache=directory), max_tokens=32)
    first.generate([Message.user(QUESTIONS[0])], tools=demo_tools)
    PrefixCache(directory).clear(keep_vocabularies=True)
    asked: list[int] = []
    real = llama_cpp.llama_token_to_piece

    def counting(vocab: Any, token: int, *rest: Any) -> int:
        asked.append(token)
        return real(vocab, token, *rest)

    monkeypatch.setattr(llama_cpp, "llama_token_to_piece", counting)
    known = LlamaCppBackend(default_model_path, n_ctx=512, prefix_cache=directory)
    known.prepare_grammar()
    known.load()
    known.vocabulary.token_mask(build_json_grammar(None), loop_guard=False)
    assert asked == []
    PrefixCache(directory).clear()
    unknown = LlamaCppBackend(default_model_path, n_ctx=512, prefix_cache=directory)
    unknown.vocabulary.token_mask(build_json_grammar(None), loop_guard=False)
    assert len(asked) > 100_000  # every token of Qwen2.5's vocabulary


def test_hammer_call_uses_the_cache_by_default(tmp_path: Path) -> None:
    env = {**os.environ, "HAMMER_PREFIX_CACHE_DIR": str(tmp_path)}
    command = [sys.executable, "-m", "hammer_plugins.cli", "call", QUESTIONS[0], "-v", "--max-tokens", "96"]
    runs = [subprocess.run(command, env=env, capture_output=True, text=True, check=True) for _ in range(2)]
    assert runs[0].stdout == runs[1].stdout and json.loads(runs[0].stdout)[0]["name"] == "get_weather"
    assert "disk_cached_prompt_tokens=0" in runs[0].stderr
    assert "disk_cached_prompt_tokens=0" not in runs[1].stderr and "disk_cached_prompt_tokens=" in runs[1].stderr
    off = subprocess.run([*command, "--no-prefix-cache"], env=env, capture_output=True, text=True, check=True)
    assert "disk_cached_prompt_tokens" not in off.stderr and off.stdout == runs[0].stdout
    cleared = subprocess.run([sys.executable, "-m", "hammer_plugins.cli", "cache", "clear"], env=env,
                             capture_output=True, text=True, check=True)
    assert "removed 2" in cleared.stdout and not list(tmp_path.glob("*.kv"))


def _smollm2() -> str:
    from hammer_evals.bfcl.machine import resolve_model as bench_model  # SmolLM2-135M, installed by scripts/install.sh

    return str(bench_model("smollm2")[1])


@pytest.mark.parametrize("model", ["default", "smollm2"])
def test_the_vocabulary_read_for_llguidance_is_llguidances_own(model: str, default_model_path: str,
                                                               tmp_path: Path) -> None:
    """Oracle: llguidance's own lltokenizer_from_vocab, on two tokenizers (Qwen2.5's and SmolLM2's).

    Ours is read from the loaded model, from the file before the weights load (prepare_grammar,
    a vocabulary-only model), and then from the cache; all three must equal the oracle token by token.
    """
    import llama_cpp
    from llguidance.llamacpp import lltokenizer_from_vocab

    from hammer_plugins.grammar.builder import build_json_grammar

    path = default_model_path if model == "default" else _smollm2()
    after_load = LlamaCppBackend(path, n_ctx=512, prefix_cache=tmp_path / "a")
    after_load.load()
    after_load.vocabulary.token_mask(build_json_grammar(None), loop_guard=False)
    before_load = LlamaCppBackend(path, n_ctx=512, prefix_cache=tmp_path / "b")
    before_load.prepare_grammar()  # the worker reads the file while load() runs
    before_load.load()
    before_load.vocabulary.token_mask(build_json_grammar(None), loop_guard=False)
    cached = LlamaCppBackend(path, n_ctx=512, prefix_cache=tmp_path / "b")
    cached.vocabulary.token_mask(build_json_grammar(None), loop_guard=False)
    assert list((tmp_path / "b" / "vocabularies").glob("*.kv"))  # stored, so `cached` read it from there
    vocab = llama_cpp.llama_model_get_vocab(after_load.llama.model)
    ends = [t for t in range(llama_cpp.llama_vocab_n_tokens(vocab)) if llama_cpp.llama_vocab_is_eog(vocab, t)]
    reference = lltokenizer_from_vocab(vocab, n_vocab=after_load.llama.n_vocab(), eos_token=ends)
    for ours in (after_load.vocabulary.tokenizer, before_load.vocabulary.tokenizer, cached.vocabulary.tokenizer):
        assert ours.vocab_size == reference.vocab_size and sorted(ours.eos_tokens) == sorted(reference.eos_tokens)
        assert all(ours.decode_bytes([i]) == reference.decode_bytes([i]) and
                   ours.is_special_token(i) == reference.is_special_token(i) for i in range(reference.vocab_size))
        assert ours.tokenize_str("<|im_start|>user [{\"a\": 1}]") == reference.tokenize_str(
            "<|im_start|>user [{\"a\": 1}]")


def test_a_file_whose_vocabulary_cannot_load_alone_gets_the_tokenizer_of_the_loaded_model(
        default_model_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from hammer_plugins.backends.llama_cpp.vocabulary import LlamaCppVocabulary
    from hammer_plugins.grammar.builder import build_json_grammar

    monkeypatch.setattr(LlamaCppVocabulary, "_vocabulary_only_model", lambda self, llama_cpp: None)
    backend = LlamaCppBackend(default_model_path, n_ctx=512)
    backend.prepare_grammar()
    backend.load()
    mask = backend.vocabulary.token_mask(build_json_grammar(None), loop_guard=False)
    assert backend.vocabulary.tokenizer.vocab_size == backend.llama.n_vocab()
    assert mask.allowed(backend.llama.n_vocab())[backend.tokenize("{")[0]]  # a JSON answer may open with {


def _one_off_tools(i: int) -> list[dict[str, Any]]:
    return [{"name": f"record_{i}_{k}", "description": f"Look up entry {k} of archive {i} by its catalogue number.",
             "parameters": {"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]}}
            for k in range(6)]


def test_one_off_tool_sets_never_evict_a_reused_prefix(default_model_path: str, demo_tools: list[Any],
                                                        tmp_path: Path) -> None:
    """Issue 60's disk-cache churn on the real model: each request with a new system text stored its state, and
    enough of them flushed every prefix. A prefix a second request used stays; the one-offs churn their share."""
    directory = tmp_path / "kv"
    engine = HammerEngine(backend=LlamaCppBackend(default_model_path, n_ctx=4096, prefix_cache=directory,
                                                  cache_ram=0), max_tokens=8)
    for _ in range(2):  # the second request finds the tools prefix in the context: it is reused
        engine.generate([Message.user(QUESTIONS[0])], tools=demo_tools)
    kept = max(Path(directory).glob("*.kv"), key=lambda p: p.stat().st_size)
    bound = 3 * kept.stat().st_size + 4096  # three such states
    flood = HammerEngine(backend=LlamaCppBackend(default_model_path, n_ctx=4096, cache_ram=0,
                                                 prefix_cache=PrefixCache(directory, max_bytes=bound)), max_tokens=8)
    for i in range(6):
        flood.generate([Message.user("Find entry 42.")], tools=_one_off_tools(i))
    assert PrefixCache(directory).size() - PrefixCache(directory).vocabularies().size() <= bound
    assert kept.exists()
    later = HammerEngine(backend=LlamaCppBackend(default_model_path, n_ctx=4096, prefix_cache=directory, cache_ram=0),
                         max_tokens=8)
    assert later.generate([Message.user(QUESTIONS[0])], tools=demo_tools).usage.disk_cached_prompt_tokens > 500
