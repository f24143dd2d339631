"""The on-disk prefix cache: a state comes back only for its own runtime and tokens, damaged files are
dropped, the store stays under its bound, vocabularies outlive states, and concurrent writers never
leave a torn file."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from hammer_plugins.backends.prefix_cache import PrefixCache

tokens_st = st.lists(st.integers(min_value=0, max_value=200_000), min_size=1, max_size=40)


@settings(max_examples=examples(60), deadline=None)
@given(runtime=st.text(max_size=30), tokens=tokens_st, other=tokens_st, state=st.binary(max_size=2000))
def test_a_state_comes_back_only_for_its_runtime_and_tokens(tmp_path_factory, runtime, tokens, other, state) -> None:
    cache = PrefixCache(tmp_path_factory.mktemp("kv"))
    cache.store(runtime, tokens, state)
    assert cache.load(runtime, tokens) == state
    assert cache.load(runtime + "x", tokens) is None
    if other != tokens:
        assert cache.load(runtime, other) is None


@settings(max_examples=examples(40), deadline=None)
@given(state=st.binary(min_size=1, max_size=500), cut=st.integers(min_value=0), flip=st.integers(min_value=0))
def test_a_damaged_file_is_a_miss_and_is_removed(tmp_path_factory, state, cut, flip) -> None:
    cache = PrefixCache(tmp_path_factory.mktemp("kv"))
    cache.store("rt", [1, 2, 3], state)
    path = cache.path_for("rt", [1, 2, 3])
    blob = bytearray(path.read_bytes())
    if flip % 2:
        blob[flip % len(blob)] ^= 0x01 << (flip % 8)
    else:
        del blob[len(blob) - 1 - cut % len(blob):]
    path.write_bytes(bytes(blob))
    assert cache.load("rt", [1, 2, 3]) is None
    assert not path.exists()


def test_the_store_stays_under_its_bound_and_keeps_the_recently_used(tmp_path: Path) -> None:
    cache = PrefixCache(tmp_path, max_bytes=3 * 1200)  # a file is the state and a header of ~120 bytes
    for i in range(3):
        cache.store("rt", [i], bytes(1000))
    assert cache.size() <= cache.max_bytes
    old = time.time() - 100
    for i in range(3):
        os.utime(cache.path_for("rt", [i]), (old + i, old + i))
    assert cache.load("rt", [0]) is not None  # used now: the newest
    cache.store("rt", [9], bytes(1000))
    assert cache.size() <= cache.max_bytes
    assert cache.load("rt", [0]) is not None and cache.load("rt", [1]) is None
    assert cache.clear() == 3 and cache.size() == 0


def test_vocabularies_outlive_the_states_they_sit_beside(tmp_path: Path) -> None:
    """A new tool set on a known model: its states go (cleared or evicted), the vocabulary stays."""
    cache = PrefixCache(tmp_path, max_bytes=2500)
    cache.vocabularies().store("model|vocabulary", [0], bytes(2000))
    for i in range(4):  # states over the bound evict states only
        cache.store("rt", [i], bytes(1000))
    assert cache.vocabularies().load("model|vocabulary", [0]) == bytes(2000)
    assert cache.size() > cache.vocabularies().size() >= 2000
    assert cache.clear(keep_vocabularies=True) >= 1 and not list(tmp_path.glob("*.kv"))
    assert cache.vocabularies().load("model|vocabulary", [0]) is not None
    assert cache.clear() == 1 and cache.size() == 0  # `hammer cache clear`: everything
    assert cache.vocabularies().load("model|vocabulary", [0]) is None


def test_an_unwritable_folder_is_not_an_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = PrefixCache(blocker / "kv")
    cache.store("rt", [1], b"state")  # nothing raised: the cache only saves time
    assert cache.load("rt", [1]) is None


def _writer(directory: str, seed: int) -> None:
    cache = PrefixCache(directory)
    for i in range(40):
        cache.store("rt", [7, 7], bytes([seed]) * (50_000 + 1000 * ((seed + i) % 7)))


def test_concurrent_writers_never_leave_a_torn_file(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_writer, args=(str(tmp_path), seed)) for seed in (1, 2, 3)]
    for process in writers:
        process.start()
    cache = PrefixCache(tmp_path)
    seen = set()
    while any(p.is_alive() for p in writers):
        state = cache.load("rt", [7, 7])
        if state is not None:
            assert len(set(state)) == 1 and 50_000 <= len(state) <= 56_000  # one writer's whole state
            seen.add(state[0])
    for process in writers:
        process.join()
        assert process.exitcode == 0
    assert cache.load("rt", [7, 7]) is not None
    assert not list(tmp_path.glob(".partial-*"))
