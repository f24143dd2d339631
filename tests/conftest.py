"""Shared fixtures. Real-model fixtures load the embedded default model once per session."""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

# The tests never see the Hugging Face cache of the machine they run on: a Hammer model pulled
# there would become the default of every test that names none (before huggingface_hub is imported).
os.environ["HF_HUB_CACHE"] = tempfile.mkdtemp(prefix="hammer-tests-hf-")
# Nor its prefix cache: `hammer call` in a test starts from an empty one, and leaves nothing behind.
os.environ["HAMMER_PREFIX_CACHE_DIR"] = tempfile.mkdtemp(prefix="hammer-tests-kv-")

from hammer_plugins import HammerEngine  # noqa: E402
from hammer_plugins.demo_tools import DEMO_TOOLS


@pytest.fixture(scope="session")
def default_model_path() -> str:
    from hammer_plugins.model_source import default_model_path as resolve

    return str(resolve())


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
