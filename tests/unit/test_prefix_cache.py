"""The on-disk prefix cache: a state comes back only for its own runtime and tokens, damaged files are
dropped, the store stays under its bound, vocabularies outlive states, and concurrent writers never
leave a torn file."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

from child_signals import die_with_the_parent
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


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                     max_leaves=6)


@settings(max_examples=examples(60), deadline=None)
@given(header=_JSON)
def test_a_header_of_any_other_json_is_a_miss_and_is_removed(tmp_path_factory, header) -> None:
    """A header that is valid JSON of another shape (null, [], 1, a dict of wrong values) used to raise
    AttributeError from every later load: the file stayed and every call failed."""
    import json

    cache = PrefixCache(tmp_path_factory.mktemp("kv"))
    cache.store("rt", [1, 2, 3], b"state")
    path = cache.path_for("rt", [1, 2, 3])
    blob = path.read_bytes()
    magic_end = blob.index(b"{")
    end = blob.index(b"\n", magic_end)
    path.write_bytes(blob[:magic_end] + json.dumps(header).encode() + blob[end:])
    assert cache.load("rt", [1, 2, 3]) is None
    assert not path.exists()


@settings(max_examples=examples(80), deadline=None)
@given(blob=st.binary(max_size=200), tokens=st.lists(st.binary(max_size=6), max_size=6),
       ends=st.lists(st.integers(min_value=0, max_value=5), max_size=3), cut=st.integers(min_value=0, max_value=50))
def test_a_vocabulary_blob_unpacks_to_what_was_packed_or_is_refused(blob, tokens, ends, cut) -> None:
    """A vocabulary whose file checksum holds but whose layout does not is a ValueError (a miss), never a
    wrong vocabulary or another exception."""
    import pytest

    from hammer_plugins.backends.llama_cpp.vocabulary import _pack_vocabulary, _unpack_vocabulary

    ends = [e for e in ends if e < len(tokens)]
    packed = _pack_vocabulary(tokens, ends)
    assert _unpack_vocabulary(packed) == (tokens, ends)
    for damaged in (blob, packed[:max(0, len(packed) - 1 - cut)], packed + blob[:1]):
        if damaged == packed:
            continue
        try:
            unpacked = _unpack_vocabulary(damaged)
        except ValueError:
            continue
        assert _pack_vocabulary(*unpacked) == damaged  # what it read is exactly what the bytes say
    with pytest.raises(ValueError):
        _unpack_vocabulary(packed[:-1] if tokens and any(tokens) else packed + b"x")


def test_the_store_stays_under_its_bound_and_keeps_the_recently_used(tmp_path: Path) -> None:
    cache = PrefixCache(tmp_path, max_bytes=3 * 1200)  # a file is the state and a header of ~120 bytes
    for i in range(3):
        cache.store("rt", [i], bytes(1000))
        assert cache.load("rt", [i]) is not None  # used again: kept for good
    assert cache.size() <= cache.max_bytes
    old = time.time() - 100
    for i in range(3):
        os.utime(cache.path_for("rt", [i]), (old + i, old + i))
    assert cache.load("rt", [0]) is not None  # used now: the newest
    cache.store("rt", [9], bytes(1000))
    assert cache.size() <= cache.max_bytes
    assert cache.load("rt", [0]) is not None and cache.load("rt", [1]) is None
    assert cache.clear() == 3 and cache.size() == 0


def test_a_flood_of_one_off_prefixes_never_evicts_a_reused_one(tmp_path: Path) -> None:
    """The red team's churn: each request with a new system prompt stored its state, and about 28 of them
    flushed every prefix under the 1 GiB bound. Now states stored once hold at most TRIAL_SHARE of the bound."""
    from hammer_plugins.backends.prefix_cache import TRIAL_SHARE

    cache = PrefixCache(tmp_path, max_bytes=12 * 1200)
    cache.store("rt", [1, 2, 3], bytes(1000))
    cache.mark_reused("rt", [1, 2, 3])  # a later request found it in the context
    for i in range(40):
        cache.store("rt", [100 + i], bytes(1000))
        trial = sum(p.stat().st_size for p in tmp_path.glob("*.kv") if p != cache.path_for("rt", [1, 2, 3]))
        assert trial <= max(cache.max_bytes * TRIAL_SHARE, 1200)
    assert cache.load("rt", [1, 2, 3]) == bytes(1000)
    assert cache.load("rt", [139]) == bytes(1000)  # the newest one-off stays for its next request
    assert cache.size() <= cache.max_bytes


def test_a_state_loaded_again_is_reused_and_the_index_survives_damage(tmp_path: Path) -> None:
    cache = PrefixCache(tmp_path, max_bytes=4 * 1200)
    cache.store("rt", [7], bytes(1000))
    assert PrefixCache(tmp_path).load("rt", [7]) is not None  # another process's load: reused
    (tmp_path / "reused.json").write_text("{not json")
    cache.store("rt", [8], bytes(1000))  # a damaged index counts nothing as reused, and is no error
    assert cache.load("rt", [8]) is not None
    cache.mark_reused("rt", [99])  # never stored: nothing to keep
    assert json.loads((tmp_path / "reused.json").read_text()) == [cache.path_for("rt", [8]).name]


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
    die_with_the_parent()
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


def test_a_model_written_over_with_the_same_size_and_time_is_another_model(tmp_path: Path) -> None:
    """The states' key names the model file by content: a different model written to the same path with the same
    size and modification time used to load the first one's KV state (the key was path, size and mtime)."""
    cache = PrefixCache(tmp_path / "kv")
    model = tmp_path / "model.gguf"
    model.write_bytes(b"A" * 4096)
    stat = model.stat()
    first = cache.file_digest(model)
    assert first == cache.file_digest(model) == PrefixCache(tmp_path / "kv").file_digest(model)
    with open(model, "r+b") as stream:  # in place: same inode and size
        stream.write(b"B" * 4096)
    os.utime(model, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same modification time
    assert model.stat().st_mtime_ns == stat.st_mtime_ns and model.stat().st_size == stat.st_size
    assert cache.file_digest(model) != first
    index = tmp_path / "kv" / "file-digests.json"
    assert index.stat().st_mode & 0o777 == 0o600
    index.write_text("[1, 2")  # a damaged index is rebuilt, not an error
    assert cache.file_digest(model) == cache.file_digest(model)
