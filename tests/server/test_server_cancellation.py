"""A cancelled call on the server backend closes its HTTP stream, so the server stops generating.

``agenerate`` streams internally (``"stream": true``), so cancelling it, like stopping an
``astream``, closes the response and the connection. Against llama.cpp's ``llama-server`` with one
slot, the slot is polled (``GET /slots``) until it is idle: the measured cancel-to-free time. Against
llama-cpp-python's server (the session fixture), the next short call must take about as long as
it does when the call before it was not cancelled (a server still decoding the cancelled answer
would make it wait for the whole of it: ~50 s).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from serverenv import API_KEY, MODEL, TIMEOUT

from hammer_plugins import HammerEngine, HammerResponse, Message
from hammer_plugins.backends.remote import OpenAICompatibleBackend
from hammer_plugins.launch import LlamaCppPythonServer, LlamaServer

pytestmark = pytest.mark.real_model

LONG_ESSAY = "Write a very long essay, at least 1500 words, about the history of Rome, century by century."
SHORT_ANSWER = "What is the capital of France? Answer in one short sentence."
FREE_WITHIN = 2.0
"""Cancel (or close) to a free slot: about 0.1 s alone, 0.51 s once beside the other worker's model; an essay that
kept decoding would hold it about 50 s."""


@pytest.fixture(scope="module")
def one_slot_server(default_model_path: str) -> Iterator[LlamaServer]:
    with LlamaServer(default_model_path, n_ctx=4096, parallel=1, model_alias=MODEL, api_key=API_KEY) as server:
        yield server


def slot_busy(server: LlamaServer) -> bool:
    slots = httpx.get(server.base_url.rstrip("/").removesuffix("/v1") + "/slots",
                      headers={"Authorization": f"Bearer {API_KEY}"}, timeout=10, trust_env=False).json()
    return any(slot.get("is_processing") for slot in slots)


async def start_long_call(engine: HammerEngine) -> asyncio.Task[HammerResponse]:
    task = asyncio.ensure_future(engine.agenerate([Message.user(LONG_ESSAY)], max_tokens=1500))
    await asyncio.sleep(2.0)  # the server is decoding the answer
    assert not task.done()
    return task


async def short(engine: HammerEngine) -> tuple[str, float]:
    started = time.perf_counter()
    answer = await engine.agenerate([Message.user(SHORT_ANSWER)], max_tokens=40)
    return answer.text, time.perf_counter() - started


async def test_llama_server_stops_decoding_when_agenerate_is_cancelled(one_slot_server: LlamaServer) -> None:
    async with OpenAICompatibleBackend(one_slot_server.base_url, api_key=API_KEY, timeout=TIMEOUT,
                                       trust_env=False) as backend:
        engine = HammerEngine(backend=backend)
        reference, _ = await short(engine)
        task = await start_long_call(engine)
        assert await asyncio.to_thread(slot_busy, one_slot_server)
        cancelled = time.perf_counter()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        while await asyncio.to_thread(slot_busy, one_slot_server):
            assert time.perf_counter() - cancelled < 30, "llama-server kept decoding the cancelled answer"
            await asyncio.sleep(0.01)
        free = time.perf_counter() - cancelled
        print(f"\ncancel-to-free llama-server (one slot), agenerate: {free:.3f} s")
        assert free < FREE_WITHIN
        assert backend.stats.in_flight == 0
        text, _ = await short(engine)
        assert text == reference


async def test_llama_cpp_python_server_is_free_after_a_cancelled_agenerate(llama_server: LlamaCppPythonServer,
                                                                          server_engine: HammerEngine) -> None:
    reference, baseline = await short(server_engine)
    task = await start_long_call(server_engine)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    text, seconds = await short(server_engine)
    print(f"\nllama-cpp-python server: short call {baseline:.3f} s alone, {seconds:.3f} s after a cancelled one")
    assert text == reference
    assert seconds < baseline + 2 * FREE_WITHIN + 1.0  # not the ~50 s the cancelled answer would have taken


async def test_a_closed_astream_closes_the_request(one_slot_server: LlamaServer) -> None:
    async with OpenAICompatibleBackend(one_slot_server.base_url, api_key=API_KEY, timeout=TIMEOUT,
                                       trust_env=False) as backend:
        engine = HammerEngine(backend=backend)
        stream: Any = engine.astream([Message.user(LONG_ESSAY)], max_tokens=1500)
        seen = 0
        async for _ in stream:
            seen += 1
            if seen == 10:
                break
        closed = time.perf_counter()
        await stream.aclose()
        while await asyncio.to_thread(slot_busy, one_slot_server):
            assert time.perf_counter() - closed < 30, "llama-server kept decoding after the stream was closed"
            await asyncio.sleep(0.01)
        print(f"\nclose-to-free llama-server (one slot), astream: {time.perf_counter() - closed:.3f} s")
        assert time.perf_counter() - closed < FREE_WITHIN
