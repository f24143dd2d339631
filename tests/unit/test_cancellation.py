"""Cancellation stops the model (issue 23, item 5), on a slow fake backend: no model needed.

A cancelled ``agenerate``, a cancelled or closed ``astream`` and a closed sync ``stream`` stop the
generation at the next token and release the model's lock; a call queued behind the lock gives up
as soon as it is cancelled. The real-model measurements are in tests/real/test_cancellation_real.py.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hammer_plugins import HammerEngine, Message, TextDelta
from hammer_plugins.backends.base import Backend, GenerationCancelled, GenerationChunk, GenerationSettings
from hammer_plugins.backends.bridge import iterate_in_thread
from hammer_plugins.backends.prefix_cache import PrefixCache
from hammer_plugins.grammar.builder import Grammar
from hammer_plugins.output.response import Usage
from hammer_plugins.support.private_folder import KEY_BYTES, KEY_FILE

TOKEN_SECONDS = 0.02


class SlowBackend(Backend):
    """Writes ``word `` every 20 ms up to max_tokens, checking for cancellation between tokens as the
    real decoding loops do; records how many tokens each generation made and whether it was closed."""

    name = "slow"

    def __init__(self) -> None:
        super().__init__()
        self.produced: list[int] = []
        self.closed = 0
        self.running = threading.Event()

    @property
    def model_name(self) -> str:
        return "slow"

    @property
    def context_window(self) -> int:
        return 1 << 20

    def load(self) -> None:
        return None

    def count_tokens(self, text: str) -> int:
        return max(1, len(text) // 4)

    def _stream(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None) -> Iterator[GenerationChunk]:
        self.produced.append(0)
        self.running.set()
        try:
            for _ in range(settings.max_tokens):
                self._check_cancel()
                time.sleep(TOKEN_SECONDS)
                self.produced[-1] += 1
                yield GenerationChunk(text="word ")
            yield GenerationChunk(text="", finish_reason="length",
                                  usage=Usage(prompt_tokens=1, completion_tokens=settings.max_tokens))
        finally:
            self.running.clear()
            self.closed += 1


LONG = [Message.user("Write a long story")]


async def test_a_cancelled_agenerate_stops_the_model_before_the_cancellation_returns() -> None:
    backend = SlowBackend()
    engine = HammerEngine(backend=backend, max_tokens=10_000)
    task = asyncio.create_task(engine.agenerate(LONG))
    await asyncio.sleep(0.3)
    assert backend.produced and backend.produced[-1] > 3
    cancelled_at = time.perf_counter()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.perf_counter() - cancelled_at < 0.25
    assert not backend._lock.locked() and not backend.running.is_set() and backend.closed == 1
    stopped_at = backend.produced[-1]
    await asyncio.sleep(0.1)
    assert backend.produced[-1] == stopped_at  # nothing generates in the background
    answer = await engine.agenerate([Message.user("hi")], max_tokens=3)  # the model is free for the next call
    assert answer.text == "word word word"


async def test_wait_for_timeout_leaves_the_model_free() -> None:
    backend = SlowBackend()
    engine = HammerEngine(backend=backend, max_tokens=10_000)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(engine.agenerate(LONG), timeout=0.2)
    assert not backend._lock.locked() and not backend.running.is_set()


async def test_a_cancelled_astream_stops_the_model() -> None:
    backend = SlowBackend()
    engine = HammerEngine(backend=backend, max_tokens=10_000)
    seen: list[str] = []

    async def consume() -> None:
        async for event in engine.astream(LONG):
            if isinstance(event, TextDelta):
                seen.append(event.text)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen and not backend._lock.locked() and not backend.running.is_set()


async def test_an_astream_closed_early_stops_the_model() -> None:
    backend = SlowBackend()
    engine = HammerEngine(backend=backend, max_tokens=10_000)
    stream = engine.astream(LONG)
    async for event in stream:
        if isinstance(event, TextDelta):
            break
    await stream.aclose()  # returns once the worker has stopped
    assert not backend._lock.locked() and not backend.running.is_set()
    assert backend.produced[-1] < 10 and backend.closed == 1


def test_a_sync_stream_closed_early_stops_the_model() -> None:
    backend = SlowBackend()
    engine = HammerEngine(backend=backend, max_tokens=10_000)
    events = engine.stream(LONG)
    for event in events:
        if isinstance(event, TextDelta):
            break
    events.close()  # type: ignore[attr-defined]
    assert not backend._lock.locked() and not backend.running.is_set() and backend.produced == [1]


async def test_a_call_queued_behind_the_lock_gives_up_when_cancelled() -> None:
    backend = SlowBackend()
    engine = HammerEngine(backend=backend, max_tokens=10_000)
    first = asyncio.create_task(engine.agenerate(LONG))
    await asyncio.sleep(0.2)
    queued = asyncio.create_task(engine.agenerate(LONG))
    await asyncio.sleep(0.1)
    started = time.perf_counter()
    queued.cancel()
    with pytest.raises(asyncio.CancelledError):
        await queued
    assert time.perf_counter() - started < 0.2
    assert len(backend.produced) == 1  # the queued call never started generating
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert not backend._lock.locked()


def test_stream_with_a_set_cancel_event_raises_and_releases_the_lock() -> None:
    backend = SlowBackend()
    cancel = threading.Event()
    chunks = backend.stream("prompt", GenerationSettings(max_tokens=100), cancel=cancel)
    assert next(chunks).text == "word "
    cancel.set()
    with pytest.raises(GenerationCancelled):
        next(chunks)
    assert not backend._lock.locked() and backend.closed == 1 and backend.produced == [1]


def test_an_interrupted_prefix_cache_write_leaves_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = PrefixCache(tmp_path)

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("hammer_plugins.backends.prefix_cache.os.replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        cache.store("rt", [1, 2, 3], b"state" * 1000)
    # No entry and no partial file: only the folder's HMAC key, made whole before the entry was begun, stays.
    assert [path.name for path in tmp_path.iterdir()] == [KEY_FILE]
    assert len((tmp_path / KEY_FILE).read_bytes()) == KEY_BYTES


def test_temporary_files_of_a_killed_process_are_removed_later(tmp_path: Path) -> None:
    import os

    stale = tmp_path / ".partial-killed.kv"
    stale.write_bytes(b"half")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    fresh = tmp_path / ".partial-writing-now.kv"  # another process's write in progress: kept
    fresh.write_bytes(b"half")
    cache = PrefixCache(tmp_path)
    cache.store("rt", [1], b"state")
    assert not stale.exists() and fresh.exists() and cache.load("rt", [1]) == b"state"


def test_ctrl_c_in_the_cli_is_one_line_and_status_130(monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from hammer_plugins.cli import main as cli

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_cache", interrupted)
    assert cli.main(["cache", "info"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "hammer: interrupted" and "Traceback" not in err


# ------------------------------------------------------------------ the thread bridge itself
def _until_cancelled(log: list[str], name: str) -> Callable[[threading.Event], Iterator[str]]:
    """A generation that yields a token every 10 ms until stopped, and logs when it begins and ends."""
    def make(cancel: threading.Event) -> Iterator[str]:
        log.append(f"{name} began")
        try:
            while not cancel.wait(0.01):
                yield name
        finally:
            log.append(f"{name} ended")
    return make


async def test_the_bridge_skips_a_generation_still_queued_and_closing_it_does_not_wait() -> None:
    log: list[str] = []
    with ThreadPoolExecutor(max_workers=1) as executor:
        first = iterate_in_thread(_until_cancelled(log, "first"), threading.Event(), executor)
        assert await anext(first) == "first"
        queued = iterate_in_thread(_until_cancelled(log, "queued"), threading.Event(), executor)
        waiting = asyncio.ensure_future(anext(queued))
        await asyncio.sleep(0.05)
        started = time.perf_counter()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert time.perf_counter() - started < 0.1  # the running generation did not hold it
        await first.aclose()  # waits for the thread: the generation has ended when this returns
        assert log == ["first began", "first ended"]
    assert log == ["first began", "first ended"]  # the executor reached the queued one and skipped it


async def test_the_bridge_ends_when_its_executor_drops_the_generation_unrun() -> None:
    log: list[str] = []
    executor = ThreadPoolExecutor(max_workers=1)
    first = iterate_in_thread(_until_cancelled(log, "first"), threading.Event(), executor)
    assert await anext(first) == "first"
    queued = asyncio.ensure_future(anext(iterate_in_thread(_until_cancelled(log, "queued"), threading.Event(), executor)))
    await asyncio.sleep(0.05)
    executor.shutdown(wait=False, cancel_futures=True)  # the server closing
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(queued, timeout=2)
    await first.aclose()
    assert log == ["first began", "first ended"]


async def test_the_bridge_raises_the_threads_error_but_not_a_cancellation() -> None:
    def fails(cancel: threading.Event) -> Iterator[int]:
        yield 1
        raise ValueError("prompt too long")

    def stopped(cancel: threading.Event) -> Iterator[int]:
        yield 1
        raise GenerationCancelled

    with pytest.raises(ValueError, match="prompt too long"):
        [item async for item in iterate_in_thread(fails, threading.Event())]
    assert [item async for item in iterate_in_thread(stopped, threading.Event())] == [1]
