"""run_concurrently: every item answered once, never more than N in flight, errors not swallowed."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from hammer_evals.concurrency import effective_concurrency, run_concurrently
from hammer_plugins import HammerEngine, ScriptedBackend


def test_one_at_a_time_keeps_the_order_and_the_thread() -> None:
    seen = []
    out = list(run_concurrently(lambda x: (seen.append(threading.get_ident()), x + 1)[1], [3, 1, 2], 1))
    assert out == [(3, 4), (1, 2), (2, 3)]
    assert set(seen) == {threading.get_ident()}


@settings(max_examples=examples(40), deadline=None)
@given(items=st.lists(st.integers(0, 1000), max_size=30), concurrency=st.integers(1, 6))
def test_every_item_once_and_never_more_than_n_in_flight(items: list[int], concurrency: int) -> None:
    lock = threading.Lock()
    in_flight = peak = 0

    def call(x: int) -> int:
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
        time.sleep(0.001 * (x % 3))
        with lock:
            in_flight -= 1
        return x * 2

    out = list(run_concurrently(call, items, concurrency))
    assert sorted(out) == sorted((x, 2 * x) for x in items)
    assert peak <= concurrency


def test_n_calls_really_overlap() -> None:
    barrier = threading.Barrier(3, timeout=10)  # passes only when three calls run at once
    assert sorted(x for x, _ in run_concurrently(lambda x: barrier.wait(), [1, 2, 3], 3)) == [1, 2, 3]


def test_an_error_is_raised_after_the_answers_that_finished() -> None:
    def call(x: int) -> int:
        if x == 2:
            time.sleep(0.05)
            raise RuntimeError("server gone")
        return x

    got = []
    with pytest.raises(RuntimeError, match="server gone"):
        for item, result in run_concurrently(call, [1, 2, 3], 2):
            got.append((item, result))
    assert (1, 1) in got


def test_a_local_backend_runs_one_at_a_time(capsys: pytest.CaptureFixture[str]) -> None:
    assert effective_concurrency(HammerEngine(backend=ScriptedBackend()), 4) == 1
    assert "--concurrency 4 ignored" in capsys.readouterr().err
    with pytest.raises(ValueError, match="at least 1"):
        effective_concurrency(None, 0)


@settings(max_examples=examples(30), deadline=None)
@given(n=st.integers(0, 40), concurrency=st.integers(2, 5))
def test_each_worker_takes_a_contiguous_run_in_order(n: int, concurrency: int) -> None:
    """Neighbours in a prefix-sorted schedule stay on one worker, hence on one server slot."""
    by_thread: dict[str, list[int]] = {}
    lock = threading.Lock()

    def call(x: int) -> int:
        with lock:
            by_thread.setdefault(threading.current_thread().name, []).append(x)
        return x

    assert sorted(x for x, _ in run_concurrently(call, range(n), concurrency)) == list(range(n))
    assert len(by_thread) <= concurrency
    for taken in by_thread.values():
        assert taken == list(range(taken[0], taken[0] + len(taken)))
