"""The memory prompt cache's rules without a model (issue 59): longest shared prefix, least recently used
eviction within the budget, no state kept twice, the counts /health shows; the setting's ways in."""

from __future__ import annotations

import argparse
from typing import Any

import httpx
import pytest

from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.backends.llama_cpp import LlamaCppBackend
from hammer_plugins.backends.prompt_states import MIB, PromptStates, shared_prefix
from hammer_plugins.cli.serve import add_serve_parser
from hammer_plugins.engine.fields import DEFAULTS
from hammer_plugins.openai_server import BackgroundServer, create_app


def test_the_longest_shared_prefix_wins_whichever_request_left_it() -> None:
    states = PromptStates(max_bytes=1000)
    states.add([1, 2, 3], b"a" * 10)
    states.add([1, 2, 4, 5, 6], b"b" * 10)
    states.add([7, 8], b"c" * 10)
    assert states.longest([1, 2, 4, 5, 9])[0].tokens == (1, 2, 4, 5, 6)
    assert states.longest([1, 2, 3, 3])[1] == 3
    assert states.longest([9]) == (None, 0)
    assert shared_prefix([1, 2, 3], [1, 2, 3]) == 3


def test_the_budget_evicts_the_least_recently_used() -> None:
    states = PromptStates(max_bytes=100)
    for i in range(50):
        states.add([i, i], b"x" * 30)
        if i == 10:
            states.touch(states.longest([8, 8])[0])  # restored: now the most recently used
        assert states.size <= 100
        if i == 11:
            assert [s.tokens[0] for s in states.entries()] == [10, 8, 11]  # 9 went, not 8
    assert [s.tokens[0] for s in states.entries()] == [47, 48, 49] and states.stats()["evicted"] == 47
    assert not states.add([99], b"y" * 101) and len(states) == 3  # larger than the whole budget: not kept


def test_a_state_is_never_kept_twice() -> None:
    states = PromptStates(max_bytes=1000)
    states.add([1, 2], b"a" * 10)
    assert states.add([1, 2, 3], b"b" * 10)  # it serves every prompt [1, 2] would: [1, 2] goes
    assert [s.tokens for s in states.entries()] == [(1, 2, 3)] and states.size == 10
    assert not states.add([1, 2], b"c" * 10)  # covered


def test_the_counts_give_both_hit_rates() -> None:
    states = PromptStates(max_bytes=MIB)
    states.record(prompt_tokens=100, cached_tokens=0, restored=False)
    states.record(prompt_tokens=100, cached_tokens=90, restored=True)
    stats = states.stats()
    assert (stats["requests"], stats["restored"], stats["hit_rate"], stats["token_hit_rate"]) == (2, 1, 0.5, 0.45)


def test_cache_ram_is_a_setting_of_the_engine_the_backend_and_hammer_serve() -> None:
    assert DEFAULTS.cache_ram == 1024
    assert LlamaCppBackend(n_ctx=512).prompt_states.max_bytes == 1024 * MIB
    assert LlamaCppBackend(n_ctx=512, cache_ram=0).prompt_states is None
    with pytest.raises(ValueError, match="cache_ram"):
        LlamaCppBackend(n_ctx=512, cache_ram=-1)
    engine = HammerEngine(n_ctx=512, cache_ram=16)
    assert engine.backend.prompt_states.max_bytes == 16 * MIB and not engine.is_loaded
    parser = argparse.ArgumentParser()
    add_serve_parser(parser.add_subparsers())
    assert parser.parse_args(["serve", "--openai", "--cache-ram", "0"]).cache_ram == 0
    assert parser.parse_args(["serve", "--openai"]).cache_ram == 1024


class _Cached(ScriptedBackend):
    def cache_stats(self) -> dict[str, Any] | None:
        return {"states": 2, "bytes": 10, "max_bytes": 100, "hit_rate": 0.5}


def test_health_shows_the_prompt_cache_once_the_model_is_loaded() -> None:
    backend = _Cached(["[]"])
    backend.load()
    with BackgroundServer(create_app(HammerEngine(backend=backend), model_name="hammer")) as server:
        assert httpx.get(server.url + "/health").json()["prompt_cache"]["hit_rate"] == 0.5
    with BackgroundServer(create_app(HammerEngine(backend=ScriptedBackend(["[]"])), model_name="hammer")) as server:
        assert "prompt_cache" not in httpx.get(server.url + "/health").json()  # no cache in this process


# --------------------------------------------------------------- the states of prompts that outlive the process
def test_stored_prompts_are_found_by_longest_prefix_under_their_runtime_only(tmp_path: Any) -> None:
    from hammer_plugins.backends.prefix_cache import PrefixCache

    prompts = PrefixCache(tmp_path).prompts()
    prompts.store_extending("model-a", [1, 2, 3, 4], b"a" * 10)
    prompts.store_extending("model-a", [1, 2, 9], b"b" * 10)
    prompts.store_extending("model-b", [1, 2, 3, 4, 5, 6], b"c" * 10)  # another model: never a match for model-a
    assert prompts.longest("model-a", [1, 2, 3, 4, 5, 6]) == ([1, 2, 3, 4], 4)
    assert prompts.longest("model-a", [1, 2, 9, 9]) == ([1, 2, 9], 3)
    assert prompts.longest("model-c", [1, 2, 3]) == ([], 0)
    prompts.store_extending("model-a", [1, 2, 3, 4, 7], b"d" * 10)  # extends [1, 2, 3, 4]: that one goes
    assert prompts.load("model-a", [1, 2, 3, 4]) is None and prompts.load("model-a", [1, 2, 9]) == b"b" * 10
    assert PrefixCache(tmp_path).size() == prompts.size() > 30 and PrefixCache(tmp_path).clear() == 3
    assert prompts.longest("model-a", [1, 2, 3]) == ([], 0)


def test_a_damaged_or_planted_stored_prompt_is_a_miss(tmp_path: Any) -> None:
    import os

    from hammer_plugins.backends.prefix_cache import PrefixCache

    prompts = PrefixCache(tmp_path).prompts()
    prompts.store_extending("rt", [1, 2, 3], b"kv" * 50)
    entry = prompts.path_for("rt", [1, 2, 3])
    blob = bytearray(entry.read_bytes())
    blob[-1] ^= 1
    entry.write_bytes(bytes(blob))
    assert prompts.longest("rt", [1, 2, 3]) == ([1, 2, 3], 3)  # its header is read; its state is checked on load
    assert prompts.load("rt", [1, 2, 3]) is None and not entry.exists()
    os.mkfifo(prompts.path_for("rt", [4, 5]))  # a FIFO where an entry would be: skipped, never a blocked read
    (tmp_path / "prompts" / "planted.kv").symlink_to(tmp_path / "elsewhere.kv")
    assert prompts.longest("rt", [4, 5, 6]) == ([], 0)
