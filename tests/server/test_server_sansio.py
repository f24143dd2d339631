"""The server backend's I/O-free cores and its two drivers, without a server.

A core is driven by hand here (the requests it yields, the replies sent back), and both drivers run
against httpx's MockTransport, so each rule, written once in a core, is seen to act the same sync and async.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest

from hammer_plugins import ContextWindowExceededError, HammerEngine, Message
from hammer_plugins.backends.base import GenerationChunk, GenerationSettings
from hammer_plugins.backends.remote import OpenAICompatibleBackend
from hammer_plugins.backends.remote.sansio import _Read, _Send, _Sleep
from hammer_plugins.values.errors import ServerAuthenticationError, ServerStreamError, ServerUnavailableError

# The scripted bodies send calls no question gave values for: these tests are about decoding over the server,
# so the ask-or-call rule is off whatever the default; tests/unit/test_ask_or_call.py tests it.
RULE_OFF = "call"

EVENTS = [b'data: {"choices": [{"index": 0, "text": "Hel", "finish_reason": null}]}\n\n',
          b'data: {"choices": [{"index": 0, "text": "lo", "finish_reason": "stop"}]}\n\n', b"data: [DONE]\n\n"]
SSE = {"content-type": "text/event-stream"}
MODELS = {"data": [{"id": "m", "owned_by": "me"}]}
OVERFLOW = {"error": {"message": "This model's maximum context length is 2048 tokens, however you requested 3000 "
                                 "tokens (2990 in your prompt; 10 for the completion).", "code": "context_length_exceeded"}}


class Body(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body for both clients that can break after its parts, and records whether it was closed."""

    def __init__(self, parts: list[bytes], error: Exception | None = None) -> None:
        self.parts, self.error, self.closed = parts, error, False

    def __iter__(self) -> Iterator[bytes]:
        yield from self.parts
        if self.error is not None:
            raise self.error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            yield part
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


class Mocked(OpenAICompatibleBackend):
    """The backend with both of its clients on a MockTransport; records the thread each request came from."""

    def __init__(self, completions: list[httpx.Response], **options: Any) -> None:
        options = {"model": "m", "server_kind": "llama_cpp_python", "retry_backoff": 0.001,
                   "token_counting": "estimate", **options}
        super().__init__("http://testserver/v1", **options)
        self.completions = completions
        self.threads: list[tuple[str, int]] = []
        self._connection.transport = httpx.MockTransport(self._answer)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.threads.append((request.url.path, threading.get_ident()))
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=MODELS)
        return self.completions.pop(0)



def collect(backend: OpenAICompatibleBackend, mode: str, max_tokens: int = 16) -> list[GenerationChunk]:
    """All chunks of one completion, on the sync or on the async driver."""
    settings = GenerationSettings(max_tokens=max_tokens)
    if mode == "sync":
        return list(backend.stream("PROMPT", settings))

    async def run() -> list[GenerationChunk]:
        try:
            return [chunk async for chunk in backend.astream("PROMPT", settings)]
        finally:
            await backend.aclose()

    return asyncio.run(run())


def raised(call: Callable[[], object]) -> BaseException:
    with pytest.raises(Exception) as caught:
        call()
    return caught.value


# ------------------------------------------------------------------------- a core by hand
def test_the_send_core_retries_and_maps_errors_without_doing_any_io() -> None:
    backend = OpenAICompatibleBackend("http://testserver", max_retries=2, retry_backoff=0.5, max_backoff=4)
    core = backend._connection.send("POST", "/v1/completions", {"prompt": "p"})
    assert next(core) == _Send("POST", "/v1/completions", {"prompt": "p"})
    delay = core.throw(httpx.ConnectError("refused"))  # the driver's exception, mapped by the core
    assert isinstance(delay, _Sleep) and 0.5 <= delay.seconds <= 0.625
    assert core.send(None) == _Send("POST", "/v1/completions", {"prompt": "p"})
    busy = httpx.Response(503, headers={"Retry-After": "3"})
    assert core.send(busy) == _Read(busy)  # the error body, for the message
    assert core.send(b'{"error": {"message": "Loading model"}}') == _Sleep(3.0)  # Retry-After wins
    assert core.send(None) == _Send("POST", "/v1/completions", {"prompt": "p"})
    assert core.send(busy) == _Read(busy)
    with pytest.raises(ServerUnavailableError, match="HTTP 503 .*Loading model.*still after the retries"):
        core.send(b'{"error": {"message": "Loading model"}}')
    assert (backend.stats.requests, backend.stats.retries) == (3, 2)


# ----------------------------------------------------------------- both drivers, same rules
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_both_drivers_retry_then_stream_the_same_chunks(mode: str) -> None:
    backend = Mocked([httpx.Response(503, json={"error": {"message": "Loading model"}}),
                      httpx.Response(200, headers=SSE, stream=Body(EVENTS))])
    chunks = collect(backend, mode)
    assert [c.text for c in chunks] == ["Hel", "lo", ""]
    final = chunks[-1]
    assert final.finish_reason == "stop" and final.usage is not None and final.usage.completion_tokens == 3
    stats = backend.stats
    assert (stats.requests, stats.retries, stats.completions, stats.errors, stats.in_flight) == (3, 1, 1, 0, 0)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_async_driver_sends_from_the_loop_and_only_setup_leaves_it(mode: str) -> None:
    backend = Mocked([httpx.Response(200, headers=SSE, stream=Body(EVENTS))])
    collect(backend, mode)
    here = threading.get_ident()
    threads = dict(backend.threads)
    assert threads["/v1/completions"] == here  # the completion itself: no worker thread
    assert (threads["/v1/models"] == here) == (mode == "sync")  # discovery: a one-off step in a worker thread


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_both_drivers_raise_the_same_errors(mode: str) -> None:
    denied = Mocked([httpx.Response(401, json={"detail": "Invalid API key"})], max_retries=3)
    assert isinstance(raised(lambda: collect(denied, mode)), ServerAuthenticationError)
    assert denied.stats.retries == 0 and denied.stats.errors == 1
    cut = Mocked([httpx.Response(200, headers=SSE, stream=Body(EVENTS[:1], httpx.ReadError("reset")))], max_retries=3)
    error = raised(lambda: collect(cut, mode))
    assert isinstance(error, ServerStreamError) and "broke mid-stream" in str(error) and error.partial_text == "Hel"
    assert cut.stats.retries == 0 and cut.stats.in_flight == 0


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_empty_stream_is_diagnosed_by_asking_again(mode: str) -> None:
    backend = Mocked([httpx.Response(200, headers=SSE, stream=Body([])), httpx.Response(400, json=OVERFLOW)])
    error = raised(lambda: collect(backend, mode, max_tokens=77))
    assert isinstance(error, ContextWindowExceededError)
    assert (error.prompt_tokens, error.max_new_tokens, error.context_window) == (2990, 77, 2048)
    assert backend.stats.errors == 1 and backend.context_window == 2048  # learned from the answer


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_caller_that_stops_reading_closes_the_response(mode: str) -> None:
    body = Body(EVENTS * 20)
    backend = Mocked([httpx.Response(200, headers=SSE, stream=body)])
    settings = GenerationSettings(max_tokens=64)
    if mode == "sync":
        chunks = backend.stream("PROMPT", settings)
        assert next(iter(chunks)).text == "Hel"
        chunks.close()  # type: ignore[attr-defined]
    else:
        async def stop_early() -> None:
            chunks = backend.astream("PROMPT", settings)
            assert (await anext(chunks)).text == "Hel"
            await chunks.aclose()  # type: ignore[attr-defined]
            await backend.aclose()

        asyncio.run(stop_early())
    assert body.closed and backend.stats.in_flight == 0 and backend.stats.completions == 0


def test_token_counts_are_asked_once_whichever_driver_asks() -> None:
    counted: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/models":
            return httpx.Response(200, json=MODELS)
        counted.append(request.content.decode())
        return httpx.Response(200, json={"count": 7})

    backend = Mocked([], token_counting="server")
    backend._connection.transport = httpx.MockTransport(answer)

    async def twice() -> list[int]:
        counts = [await backend.acount_tokens("hello"), await backend.acount_tokens("hello")]
        await backend.aclose()
        return counts

    assert asyncio.run(twice()) == [7, 7] and backend.count_tokens("hello") == 7
    assert len(counted) == 1 and '"input":"hello"' in counted[0].replace(" ", "")


# ------------------------------------------------------------------ the loop guard, for a server that decodes
GOAL_TOOLS = [{"name": "get_goal", "description": "The goal.", "parameters": {"type": "object", "properties": {}}},
              {"name": "update_goal", "description": "Update the goal.", "parameters": {
                  "type": "object", "properties": {"status": {"type": "string"}}, "required": ["status"]}}]


class CountedBody(Body):
    """A :class:`Body` that counts the parts the backend read before it closed the stream."""

    def __init__(self, parts: list[bytes]) -> None:
        super().__init__(parts)
        self.read = 0

    def __iter__(self) -> Iterator[bytes]:
        for part in self.parts:
            self.read += 1
            yield part

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            self.read += 1
            yield part


def streamed(texts: list[str]) -> list[bytes]:
    chunks = [{"choices": [{"index": 0, "text": text, "finish_reason": None}]} for text in texts]
    chunks.append({"choices": [{"index": 0, "text": "", "finish_reason": "length"}]})
    return [b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks] + [b"data: [DONE]\n\n"]


def decoding_server(body: Body) -> Mocked:
    """A server that applies the grammar itself (llama-server's protocol, trusted without a probe)."""
    return Mocked([httpx.Response(200, headers=SSE, stream=body)], grammar_protocol="llama_cpp", verify_grammar=False)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_call_list_that_repeats_is_stopped_and_its_calls_kept(mode: str) -> None:
    """What the stand-in wrote for Codex CLI's prompt on llama-server: two calls over and over until
    max_tokens. The backend stops reading at the first repeat (the server stops generating once the
    stream closes) and the engine keeps the calls, as with a local runtime's loop guard."""
    loop = ['{"name": "get_goal", "arguments": {}},\n', '{"name": "update_goal", "arguments": {"status": "complete"}},\n']
    parts = streamed(["```json\n[\n", *loop * 40])
    body = CountedBody(parts)
    engine = HammerEngine(backend=decoding_server(body), max_tokens=2000, on_missing=RULE_OFF)
    question = [Message.user("Say hello.")]
    out = engine.generate(question, tools=GOAL_TOOLS) if mode == "sync" else asyncio.run(
        engine.agenerate(question, tools=GOAL_TOOLS))
    assert out.kind == "tool_calls" and [c.name for c in out.tool_calls][:2] == ["get_goal", "update_goal"]
    assert out.finish_reason == "tool_calls" and out.timings.get("loop_guard_stop") == 1
    assert body.closed and body.read <= 5 < len(parts)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_call_list_without_a_repeat_streams_to_its_end(mode: str) -> None:
    parts = streamed(['[{"name": "get_goal", "arguments": {}}, ', '{"name": "update_goal", "arguments": '
                      '{"status": "complete"}}]'])
    engine = HammerEngine(backend=decoding_server(CountedBody(parts)), on_missing=RULE_OFF)
    question = [Message.user("Say hello.")]
    out = engine.generate(question, tools=GOAL_TOOLS) if mode == "sync" else asyncio.run(
        engine.agenerate(question, tools=GOAL_TOOLS))
    assert [c.name for c in out.tool_calls] == ["get_goal", "update_goal"] and "loop_guard_stop" not in out.timings


# ------------------------------------------------------------------------------ prefill
class Prefilled(Mocked):
    """llama-server on a MockTransport: its /props, and /completion prefills answered ``prefill_status``."""

    def __init__(self, completions: list[httpx.Response], prefill_status: int = 200, **options: Any) -> None:
        super().__init__(completions, **{"server_kind": "llama_server", **options})
        self.prefill_status = prefill_status
        self.sent: list[tuple[str, Any]] = []

    def _answer(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.sent.append((request.url.path, body))
        if request.url.path == "/props":
            return httpx.Response(200, json={"default_generation_settings": {"n_ctx": 4096}})
        if request.url.path == "/completion":
            return httpx.Response(self.prefill_status, json={"content": "", "tokens_evaluated": 5})
        return super()._answer(request)


HEAD = "<|im_start|>system\nYou are a careful agent.<|im_end|>\n"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_head_is_prefilled_once_before_the_call_and_a_failed_prefill_costs_the_call_nothing(mode: str) -> None:
    """llama-server gets each head once, as n_predict 0 on /completion before the call's completion; a
    second call with the same head sends none; a prefill the server refuses leaves the call's answer as it was
    and is tried again on the next call; vLLM is never asked."""
    def stream() -> httpx.Response:
        return httpx.Response(200, headers=SSE, stream=Body(EVENTS))

    def run(backend: OpenAICompatibleBackend) -> str:
        settings = GenerationSettings(max_tokens=16, prefill=[HEAD])
        if mode == "sync":
            return "".join(c.text for c in backend.stream("PROMPT", settings))

        async def chunks() -> str:
            try:
                return "".join([c.text async for c in backend.astream("PROMPT", settings)])
            finally:
                await backend.aclose()

        return asyncio.run(chunks())

    backend = Prefilled([stream(), stream()])
    assert run(backend) == "Hello" and run(backend) == "Hello"
    posted = [(path, body) for path, body in backend.sent if path in ("/completion", "/v1/completions")]
    assert [path for path, _ in posted] == ["/completion", "/v1/completions", "/v1/completions"]
    assert posted[0][1] == {"prompt": HEAD, "n_predict": 0, "cache_prompt": True}

    refusing = Prefilled([stream(), stream()], prefill_status=400)
    assert run(refusing) == "Hello" and run(refusing) == "Hello"
    posted = [path for path, _ in refusing.sent if path in ("/completion", "/v1/completions")]
    assert posted == ["/completion", "/v1/completions", "/completion", "/v1/completions"]

    vllm = Prefilled([stream()], server_kind="vllm")
    assert run(vllm) == "Hello"
    assert "/completion" not in [path for path, _ in vllm.sent]
