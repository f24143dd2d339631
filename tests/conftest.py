"""Shared fixtures. Real-model fixtures load the embedded default model once per session."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import child_signals
import hypothesis_profiles
import model_guard
import pytest

# The tests never see the Hugging Face cache of the machine they run on: a Hammer model pulled
# there would become the default of every test that names none (before huggingface_hub is imported).
os.environ["HF_HUB_CACHE"] = tempfile.mkdtemp(prefix="hammer-tests-hf-")
# Nor its prefix cache: `hammer call` in a test starts from an empty one, and leaves nothing behind.
os.environ["HAMMER_PREFIX_CACHE_DIR"] = tempfile.mkdtemp(prefix="hammer-tests-kv-")

from hammer_plugins import HammerEngine  # noqa: E402
from hammer_plugins.tools.demo import DEMO_TOOLS

_TEMPORARY = [os.environ["HF_HUB_CACHE"], os.environ["HAMMER_PREFIX_CACHE_DIR"]]  # removed when the session ends
hypothesis_profiles.register()


_PATCHES = pytest.StashKey[pytest.MonkeyPatch]()


def _pin_this_worker() -> None:
    """``HAMMER_TEST_PIN_WORKERS=1``: each pytest-xdist worker, every thread of it and every process it starts
    (they inherit the mask) runs on CPUs of its own, a share of the ones this process may use. The engine and
    llama-server count the cores they may use, so a worker's models decode with as many threads as it has
    cores: two model workers on 2 cores then split the machine instead of running 4 spinning threads on 2."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if os.environ.get("HAMMER_TEST_PIN_WORKERS") != "1" or not worker.startswith("gw") or not hasattr(os, "sched_setaffinity"):
        return
    cpus = sorted(os.sched_getaffinity(0))
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    share = set(cpus[int(worker[2:]) % len(cpus)::count]) or set(cpus)
    for thread in os.listdir("/proc/self/task"):  # threads started before this (execnet's) keep no wider mask
        try:
            os.sched_setaffinity(int(thread), share)
        except ProcessLookupError:  # a thread that ended meanwhile
            pass


def pytest_configure(config: pytest.Config) -> None:
    _pin_this_worker()
    config.stash[_PATCHES] = patches = pytest.MonkeyPatch()
    model_guard.install(patches)
    child_signals.die_with_the_tests(patches)  # a killed pytest leaves no child running (workers included)


def pytest_unconfigure(config: pytest.Config) -> None:
    config.stash[_PATCHES].undo()
    for folder in _TEMPORARY:
        shutil.rmtree(folder, ignore_errors=True)


# The slowest modules, slowest first (worker seconds on 2 pinned workers: vLLM 170, the agent CLIs 152, fast-forward
# 142, langchain-tests 130, the llama-server adversarial cases 103, HammerBench 89, the prefix cache 89, llama.cpp 88,
# the install paths 87, ...). The model phase (scripts/test.sh: 2 workers, a module whole on one, in this order,
# --no-loadscope-reorder) starts them first, so that its workers end together rather than one of them starting a
# two-minute module at the end. Measured as one run with the tests that run no model ordered last to fill the
# workers: 1,541.61 s, against 187.87 s + 1,321.88 s as two phases.
SLOW_MODULES_FIRST = (
    "tests/vllm/test_vllm_real.py", "tests/openai_server/test_agent_clis_real.py", "tests/real/test_fast_forward.py",
    "tests/langchain/test_langchain_standard.py", "tests/openai_server/test_security_llama_server.py",
    "tests/evals/hammerbench/test_real_model.py", "tests/real/test_prefix_cache_real.py", "tests/real/test_llama_cpp.py",
    "tests/packaging/test_install_paths.py", "tests/real/test_transformers.py", "tests/evals/bfcl/test_bench_real.py",
    "tests/server/test_llama_server.py", "tests/openai_server/test_playground_browser_real.py",
    "tests/real/test_decode_differential.py",
)
MODEL_MARKERS = ("real_model", "transformers_model", "vllm")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slowest modules first (SLOW_MODULES_FIRST), then the other modules with a model test, then the rest, each
    group in collection order; a module's tests keep their order."""
    module = {id(item): item.nodeid.split("::")[0] for item in items}
    with_model = {module[id(item)] for item in items if any(item.get_closest_marker(m) for m in MODEL_MARKERS)}
    rank = {name: i for i, name in enumerate(SLOW_MODULES_FIRST)}
    position = {id(item): i for i, item in enumerate(items)}

    def order(item: pytest.Item) -> tuple[int, int]:
        name = module[id(item)]
        group = rank.get(name, len(rank) if name in with_model else len(rank) + 1)
        return group, position[id(item)]

    items.sort(key=order)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test without a model marker fails if it (or a fixture it starts) runs a model: tests/model_guard.py."""
    stop = model_guard.guarding(item)
    try:
        yield
    finally:
        stop()


@pytest.fixture(scope="session")
def default_model_path() -> str:
    from hammer_plugins.models.source import default_model_path as resolve

    return str(resolve())


SHARED_LLAMA_SERVER_KEY = "sk-hammer-test"
SHARED_LLAMA_SERVER_ALIAS = "hammer-test"


@pytest.fixture(scope="session")
def llama_server_4_slots(default_model_path: str) -> Iterator[Any]:
    """llama.cpp's llama-server serving the default model with 4 slots of 4,096 tokens, as
    ``SHARED_LLAMA_SERVER_ALIAS`` with ``SHARED_LLAMA_SERVER_KEY``: one start for the modules that need these
    settings (the server tests and the OpenAI API in front of llama-server). A test that kills or breaks its
    server starts its own."""
    from hammer_plugins.launch import LlamaServer

    with LlamaServer(default_model_path, n_ctx=4096, parallel=4, model_alias=SHARED_LLAMA_SERVER_ALIAS,
                     api_key=SHARED_LLAMA_SERVER_KEY) as server:
        yield server


@pytest.fixture(scope="session")
def llama_engine(default_model_path: str) -> Iterator[HammerEngine]:
    """The default model on llama.cpp, greedy, shared by the real-model tests."""
    engine = HammerEngine(model_path=default_model_path, n_ctx=4096, max_tokens=160)
    engine.load()
    yield engine


@pytest.fixture(scope="session")
def demo_tools() -> list[Any]:
    return list(DEMO_TOOLS)


@pytest.fixture(scope="session")
def qwen_lltokenizer(default_model_path: str) -> Iterator[Any]:
    """llguidance's view of the real Qwen2.5 vocabulary (vocab only: loads in well under a second)."""
    import llama_cpp
    import llguidance.llamacpp

    llama = llama_cpp.Llama(model_path=default_model_path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llama.model)
    # The tokenizer calls back into llama.cpp's vocabulary: keep the model alive while it is used.
    yield llguidance.llamacpp.lltokenizer_from_vocab(vocab)
    del llama


@pytest.fixture
def hammer_main(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Any:
    """``hammer ARGS`` in this process (``hammer_plugins.cli.main.main``: the console script's parser, commands and
    exit status, without an interpreter start and its imports): ``run(*args, stdin="")`` gives a
    ``CompletedProcess`` with the exit status, stdout and stderr. A test of the process itself (signals, the
    console script's early exit) starts one instead."""
    import io
    import subprocess
    import sys

    from hammer_plugins.cli import main as cli

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        capsys.readouterr()
        code = cli.main(list(args))
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["hammer", *args], code, out, err)

    return run


class LoopTicker:
    """Counts event-loop turns while a call runs: ticks prove the call did not block the loop.

    Usage: ``async with LoopTicker(0.01) as ticker: await ...; assert ticker.ticks >= 10``.
    """

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.ticks = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.ticks += 1

    async def __aenter__(self) -> LoopTicker:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


@pytest.fixture
def loop_ticker() -> type[LoopTicker]:
    return LoopTicker
