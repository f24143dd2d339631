"""Cancellation stops the model, on the real default model (llama.cpp): issue 23, item 5.

A long answer is started, cancelled after about a second, and the time from ``task.cancel()`` until
the model's lock can be taken (a second call could start) is measured; it must be under 0.5 s
(before the fix the worker thread decoded to the end of the answer: 12.9 s). The next call must then
give exactly the answer it gives when the call before it was not cancelled (the KV context stays
consistent): each check runs the same long question to a short, normal end first, then the short
question, as the reference.

Run with ``-s`` to see the measured times (``cancel-to-free``). The CLI half sends SIGINT to a real
``hammer call`` during a long answer.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from child_signals import default_signals

from hammer_plugins import HammerEngine, HammerResponse, Message, TextDelta
from hammer_plugins.backends.base import Backend
from hammer_plugins.tools.demo import DEMO_TOOLS, get_weather, send_email

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[2]
FREE_WITHIN = 0.5  # seconds from cancel to a free model
RUN_BEFORE_CANCEL = 1.0
# A long list of calls (greedy constrained decoding, the fast-forward loop): 19 calls, 743 tokens, ~25 s.
PEOPLE = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "niaj",
          "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "zoe"]
MANY_EMAILS = ("Send the email 'The meeting moved to 3pm' with subject 'Meeting' to each of these people, one email "
               "each: " + ", ".join(f"{name}@example.com" for name in PEOPLE) + ".")
# A long tool-free answer (llama-cpp-python's own sampling loop): 1500 tokens, ~50 s.
LONG_ESSAY = "Write a very long essay, at least 1500 words, about the history of Rome, century by century."
SHORT_CALL = "What's the weather in Paris?"
SHORT_ANSWER = "What is the capital of France? Answer in one short sentence."
LONG_TOKENS = 1500


async def cancel_after_a_second(task: asyncio.Task[Any], backend: Backend, what: str) -> float:
    """Cancel ``task`` once it has generated for a second; the seconds until ``backend``'s lock is free."""
    started = time.perf_counter()
    while not backend._lock.locked():  # generation started (the lock is held only while decoding)
        assert not task.done(), f"{what}: ended before generating ({task.result()!r})"
        assert time.perf_counter() - started < 120, f"{what}: never started generating"
        await asyncio.sleep(0.01)
    await asyncio.sleep(RUN_BEFORE_CANCEL)
    assert not task.done(), f"{what}: the answer ended before the cancel; ask for a longer one"
    cancelled = time.perf_counter()
    task.cancel()
    while not backend._lock.acquire(blocking=False):
        await asyncio.sleep(0.001)
    free = time.perf_counter() - cancelled
    backend._lock.release()
    with pytest.raises(asyncio.CancelledError):
        await task
    ended = time.perf_counter() - cancelled
    print(f"\ncancel-to-free {what}: {free:.3f} s (task ended after {ended:.3f} s)")
    assert free < FREE_WITHIN, f"{what}: the model was busy {free:.2f} s after the cancel"
    assert ended < FREE_WITHIN, f"{what}: the cancelled call took {ended:.2f} s to end"
    decoded = backend.llama.n_tokens  # type: ignore[attr-defined]
    await asyncio.sleep(0.2)
    assert backend.llama.n_tokens == decoded, f"{what}: still decoding after the cancel"  # type: ignore[attr-defined]
    return free


async def check(backend: Backend, what: str, long_call: Callable[[int], Awaitable[Any]],
                short_call: Callable[[], Awaitable[Any]], key: Callable[[Any], Any]) -> Any:
    """The reference (long call ended normally, then the short one), then the long call cancelled and
    the short one again: the same answer, and the model free within FREE_WITHIN of the cancel."""
    await long_call(24)
    reference = key(await short_call())
    task = asyncio.ensure_future(long_call(LONG_TOKENS))
    await cancel_after_a_second(task, backend, what)
    after = key(await short_call())
    assert after == reference, f"{what}: the answer after a cancelled call differs"
    return after


async def drain(stream: AsyncIterator[Any]) -> Any:
    last = None
    async for last in stream:  # noqa: B007
        pass
    return last


# ------------------------------------------------------------------------------------------ engine
async def test_engine_agenerate_with_tools(llama_engine: HammerEngine) -> None:
    async def long(n: int) -> HammerResponse:
        return await llama_engine.agenerate([Message.user(MANY_EMAILS)], tools=DEMO_TOOLS, max_tokens=n)

    async def short() -> HammerResponse:
        return await llama_engine.agenerate([Message.user(SHORT_CALL)], tools=DEMO_TOOLS)

    raw, calls = await check(llama_engine.backend, "engine.agenerate (tools)", long, short,
                             lambda r: (r.raw, [(c.name, c.arguments) for c in r.tool_calls]))
    assert calls == [("get_weather", {"city": "Paris", "unit": "celsius"})]


async def test_engine_agenerate_plain_text(llama_engine: HammerEngine) -> None:
    async def long(n: int) -> HammerResponse:
        return await llama_engine.agenerate([Message.user(LONG_ESSAY)], max_tokens=n)

    async def short() -> HammerResponse:
        return await llama_engine.agenerate([Message.user(SHORT_ANSWER)], max_tokens=40)

    text = await check(llama_engine.backend, "engine.agenerate (no tools, sampling loop)", long, short,
                       lambda r: r.text)
    assert "Paris" in text


async def test_engine_astream_with_tools(llama_engine: HammerEngine) -> None:
    async def long(n: int) -> Any:
        return await drain(llama_engine.astream([Message.user(MANY_EMAILS)], tools=DEMO_TOOLS, max_tokens=n))

    async def short() -> Any:
        return await drain(llama_engine.astream([Message.user(SHORT_CALL)], tools=DEMO_TOOLS))

    await check(llama_engine.backend, "engine.astream (tools)", long, short, lambda r: r.raw)


async def test_sync_stream_closed_early_frees_the_model(llama_engine: HammerEngine) -> None:
    backend = llama_engine.backend
    llama_engine.generate([Message.user(MANY_EMAILS)], tools=DEMO_TOOLS, max_tokens=24)
    reference = llama_engine.generate([Message.user(SHORT_CALL)], tools=DEMO_TOOLS).raw
    events = llama_engine.stream([Message.user(MANY_EMAILS)], tools=DEMO_TOOLS, max_tokens=LONG_TOKENS)
    deltas = 0
    for event in events:
        deltas += isinstance(event, TextDelta)
        if deltas == 20:
            break
    started = time.perf_counter()
    events.close()  # type: ignore[attr-defined]
    assert backend._lock.acquire(blocking=False), "the model is still held after close()"
    backend._lock.release()
    print(f"\nclose-to-free engine.stream: {time.perf_counter() - started:.3f} s")
    assert llama_engine.generate([Message.user(SHORT_CALL)], tools=DEMO_TOOLS).raw == reference


# ---------------------------------------------------------------------------------------- adapters
@pytest.fixture(scope="module")
def chat_hammer() -> Any:
    from langchain_hammer import ChatHammer

    return ChatHammer(n_ctx=4096, max_tokens=160)


async def test_chat_hammer_ainvoke(chat_hammer: Any) -> None:
    bound_long = chat_hammer.bind_tools([send_email, get_weather])
    backend = chat_hammer._engine().backend

    async def long(n: int) -> Any:
        return await bound_long.ainvoke(MANY_EMAILS, max_tokens=n)

    async def short() -> Any:
        return await bound_long.ainvoke(SHORT_CALL)

    calls = await check(backend, "ChatHammer.ainvoke (tools)", long, short,
                        lambda m: [(c["name"], c["args"]) for c in m.tool_calls])
    assert calls == [("get_weather", {"city": "Paris", "unit": "celsius"})]


async def test_chat_hammer_astream(chat_hammer: Any) -> None:
    bound = chat_hammer.bind_tools([send_email, get_weather])
    backend = chat_hammer._engine().backend

    async def long(n: int) -> Any:
        full = None
        async for chunk in bound.astream(MANY_EMAILS, max_tokens=n):
            full = chunk if full is None else full + chunk
        return full

    async def short() -> Any:
        return await bound.ainvoke(SHORT_CALL)

    await check(backend, "ChatHammer.astream (tools)", long, short,
                lambda m: [(c["name"], c["args"]) for c in m.tool_calls])


@pytest.fixture(scope="module")
def hammer_llm() -> Any:
    from llama_index.llms.hammer import HammerLLM

    return HammerLLM(n_ctx=4096, max_tokens=160)


async def test_hammer_llm_achat(hammer_llm: Any) -> None:
    from llama_index.core.base.llms.types import ChatMessage

    async def long(n: int) -> Any:
        return await hammer_llm.achat([ChatMessage(role="user", content=LONG_ESSAY)], max_tokens=n)

    async def short() -> Any:
        return await hammer_llm.achat([ChatMessage(role="user", content=SHORT_ANSWER)], max_tokens=40)

    text = await check(hammer_llm.engine.backend, "HammerLLM.achat (no tools)", long, short,
                       lambda r: r.message.content)
    assert "Paris" in text


async def test_hammer_llm_astream_chat(hammer_llm: Any) -> None:
    from llama_index.core.base.llms.types import ChatMessage

    async def long(n: int) -> Any:
        return await drain(await hammer_llm.astream_chat([ChatMessage(role="user", content=LONG_ESSAY)], max_tokens=n))

    async def short() -> Any:
        return await hammer_llm.achat([ChatMessage(role="user", content=SHORT_ANSWER)], max_tokens=40)

    await check(hammer_llm.engine.backend, "HammerLLM.astream_chat (no tools)", long, short,
                lambda r: r.message.content)


# --------------------------------------------------------------------------------------------- CLI
@pytest.mark.parametrize("command", ["call", "chat"])
def test_ctrl_c_during_a_long_answer(command: str, tmp_path: Path) -> None:
    env = {**os.environ, "HAMMER_PREFIX_CACHE_DIR": str(tmp_path / "kv")}
    args = [sys.executable, "-m", "hammer_plugins.cli", command]
    if command == "call":
        args += [MANY_EMAILS]
    args += ["--max-tokens", str(LONG_TOKENS), "--n-ctx", "4096"]
    # default_signals: a suite started as a background job would hand the child an ignored SIGINT.
    process = subprocess.Popen(args, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    assert process.stdin is not None
    if command == "chat":
        process.stdin.write(MANY_EMAILS + "\n")
        process.stdin.flush()
    # The tools prefix is evaluated and stored first (a few seconds cold); the answer (~25 s) follows.
    started = time.perf_counter()
    while not list((tmp_path / "kv").glob("*.kv")):
        assert process.poll() is None, process.communicate()
        assert time.perf_counter() - started < 120, "the prefix state was never stored"
        time.sleep(0.05)
    time.sleep(2)
    assert process.poll() is None, "the answer ended before the interrupt; ask for a longer one"
    sent = time.perf_counter()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    seconds = time.perf_counter() - sent
    print(f"\nSIGINT-to-exit hammer {command}: {seconds:.3f} s; stderr tail: {err.strip().splitlines()[-1:]}")
    assert process.returncode == 130, err
    assert "Traceback" not in err and err.strip().endswith("hammer: interrupted"), err
    assert seconds < 5
    leftovers = [p.name for p in (tmp_path / "kv").rglob("*") if p.name.startswith(".partial-")]
    assert leftovers == []
    states = [p for p in (tmp_path / "kv").glob("*.kv")]
    assert states, "the tools prefix was stored before the answer"
