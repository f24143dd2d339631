"""The in-memory caches count bytes and share one total (``CACHE_MEMORY_BYTES``).

The red team's attack: 60 distinct 9,000-tool sets, each through the engine's planning path as a door sends it
(converted from OpenAI dicts, bound, ranked, planned). The caches counted characters, and the process held
+427 MiB after about 24 sets. Here a child process plans 10 such sets and its RSS is read after each: the rise
stays under the documented total plus a margin for the allocator (each set's own working memory comes and goes).
Ten sets are enough: each puts about 31.6 MiB into the caches, 2.5 times the total in all, so the caches evict; with
the caches counting characters again, the same child rises to +398 MiB, past the bound of 192 (measured, with 60
sets as well: docs/benchmarks/security/cache-memory.json). Sixty sets took 94 s of the no-model phase; ten take 28.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hammer_plugins.support import sized_cache
from hammer_plugins.support.memory_size import deep_size
from hammer_plugins.support.sized_cache import SizedCache, cache_memory

MIB = 2**20
# What one planning pass of a 9,000-tool set allocates while it runs (its JSON, converted tools, the BM25 index
# being built) and the allocator keeps afterwards: measured 20 to 40 MiB above what the caches hold.
ALLOCATOR_MARGIN = 64 * MIB

_CHILD = r"""
import gc, json, random, sys
from hammer_plugins import HammerEngine, Message, ScriptedBackend
from hammer_plugins.engine.planning import make_plan
from hammer_plugins.engine.request import EngineRequest
from hammer_plugins.support.sized_cache import cache_memory

WORDS = "weather email calendar file note search stock flight hotel music photo video map news recipe".split()

def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))

def tools(k, n):
    out = []
    for i in range(n):
        r = random.Random(k * 100_003 + i)
        text = " ".join(WORDS[r.randrange(15)] + str(r.randrange(3000)) for _ in range(20))[:190]
        out.append({"type": "function", "function": {"name": f"set{k}_tool{i}", "description": text,
                                                     "parameters": {"type": "object", "properties": {}}}})
    return out

sets, size = int(sys.argv[1]), int(sys.argv[2])
engine = HammerEngine(backend=ScriptedBackend([]), tool_selector="bm25")
make_plan(engine, EngineRequest.of([Message.user("What's the weather in Paris?")], tools(-1, 40), "auto"))
gc.collect()
before = peak = rss()
for k in range(sets):
    plan = make_plan(engine, EngineRequest.of([Message.user("What's the weather in Paris?")], tools(k, size), "auto"))
    assert plan.offered and len(plan.offered) < 10, plan.offered  # a selection was made: the ranking ran
    gc.collect()
    peak = max(peak, rss())
held, total = cache_memory()
print(json.dumps({"peak_rise": peak - before, "held": held, "total": total}))
"""


def _plan_many(tmp_path: Path, sets: int, size: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    environ = {**os.environ, "HAMMER_CACHE_DIR": str(tmp_path / "cache"), **(env or {})}
    done = subprocess.run([sys.executable, "-c", _CHILD, str(sets), str(size)], capture_output=True, text=True,
                          env=environ, timeout=560)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(600)
def test_distinct_9000_tool_sets_hold_no_more_than_the_documented_total(tmp_path: Path) -> None:
    found = _plan_many(tmp_path, 10, 9000)
    print(f"10 distinct 9,000-tool sets: peak RSS +{found['peak_rise'] / MIB:.0f} MiB, caches hold "
          f"{found['held'] / MIB:.0f} MiB of {found['total'] / MIB:.0f} MiB")
    assert found["total"] == sized_cache.DEFAULT_CACHE_MEMORY_MB * MIB
    assert found["total"] // 2 < found["held"] <= found["total"], found  # full: the 10 sets asked for more than it holds
    assert found["peak_rise"] < found["total"] + ALLOCATOR_MARGIN, found


def test_the_total_is_a_setting(tmp_path: Path) -> None:
    """``HAMMER_CACHE_MEMORY_MB`` sets it: with 16, six 9,000-tool sets keep the caches under 16 MiB."""
    found = _plan_many(tmp_path, 6, 9000, {"HAMMER_CACHE_MEMORY_MB": "16"})
    assert found["total"] == 16 * MIB and found["held"] <= 16 * MIB, found


def test_an_entry_counts_the_bytes_it_holds_not_the_size_stated() -> None:
    cache: SizedCache[str, list[str]] = SizedCache(max_entries=100, max_size=10 * MIB)
    value = [f"word{i}" for i in range(10_000)]  # 10,000 objects: far more than their 88,890 characters
    cache.put("k", value, sum(map(len, value)))
    assert cache.size == deep_size(("k", value)) > 500_000


def test_every_cache_of_the_process_draws_on_one_total(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sized_cache, "CACHE_MEMORY_BYTES", 3 * MIB)
    first: SizedCache[int, bytes] = SizedCache(max_entries=100, max_size=100 * MIB)
    second: SizedCache[int, bytes] = SizedCache(max_entries=100, max_size=100 * MIB)
    for i in range(4):
        first.put(i, bytes(MIB // 2))
    first.get(0)  # used again: the least recently used are now 1, 2, 3
    for i in range(3):
        second.put(i, bytes(MIB // 2))
    assert first.size + second.size <= 3 * MIB
    assert first.get(0) is not None and first.get(1) is None, "the oldest entries of any cache go first"
    assert all(second.get(i) is not None for i in range(3))
    assert cache_memory()[0] <= 3 * MIB


def test_an_entry_over_the_total_is_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sized_cache, "CACHE_MEMORY_BYTES", MIB)
    cache: SizedCache[int, bytes] = SizedCache(max_entries=10, max_size=100 * MIB)
    cache.put(1, bytes(2 * MIB))
    assert cache.get(1) is None and cache.size == 0


@pytest.mark.parametrize("value", ["0", "-5", "lots"])
def test_a_bad_total_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("HAMMER_CACHE_MEMORY_MB", value)
    with pytest.raises(ValueError, match="HAMMER_CACHE_MEMORY_MB"):
        sized_cache._total_from_env()


def test_deep_size_counts_numpy_buffers_and_shared_objects_once() -> None:
    import numpy as np

    matrix = np.zeros((1000, 512), dtype=np.float32)
    assert deep_size(matrix) >= matrix.nbytes
    assert matrix[:10].nbytes <= deep_size(matrix[:10]) < matrix.nbytes  # a view: the part it views
    assert deep_size([matrix, matrix]) < 2 * matrix.nbytes


def test_regex_programs_count_their_budget() -> None:
    """RE2's memory is invisible to ``sys.getsizeof``: each compiled pattern counts as its ``max_mem``."""
    from hammer_plugins.support import linear_regex

    linear_regex.compile_pattern("^[a-z]{3}-unique-for-this-test$")
    assert linear_regex._PROGRAMS.size >= linear_regex.MAX_MEM
    assert linear_regex._PROGRAMS.max_size // linear_regex.MAX_MEM <= 16
