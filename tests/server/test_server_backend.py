"""The engine on a real OpenAI-compatible server (llama-cpp-python's, on loopback), end to end.

Greedy decoding on the embedded default model, so answers are reproducible on a given build. The
model is the base of Hammer2.1-0.5b, not Hammer itself: the server-side grammar is what makes its
calls well-formed, which these tests check is really applied by the server.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from serverenv import API_KEY, MODEL, TIMEOUT

from hammer_plugins import HammerEngine, HammerResponse, Message, TextDelta, ToolCallDelta
from hammer_plugins.backends.base import GenerationChunk, GenerationSettings
from hammer_plugins.backends.remote import OpenAICompatibleBackend
from hammer_plugins.backends.scripted import ScriptedBackend
from hammer_plugins.launch import LlamaCppPythonServer
from hammer_plugins.values.errors import GrammarNotSupportedError

pytestmark = pytest.mark.real_model

# send_email is asked for in the streaming and concurrency tests below.
CASES = [
    ("What's the weather in Paris?", "get_weather", {"city": "Paris"}),
    ("What is 17 * 23?", "calculate", {"expression": "17 * 23"}),
]


def ask(engine: HammerEngine, question: str, tools: list[Any], **kwargs: Any) -> HammerResponse:
    return engine.generate([Message.user(question)], tools=tools, **kwargs)


async def engine_calls_astream() -> bool:
    """Whether HammerEngine.agenerate uses a native-async backend's astream (no server needed)."""
    called = False

    class Native(ScriptedBackend):
        native_async = True

        async def aload(self) -> None:
            return None

        async def acount_tokens(self, text: str) -> int:
            return self.count_tokens(text)

        async def astream(self, prompt: str, settings: GenerationSettings,
                          grammar: str | None = None) -> AsyncIterator[GenerationChunk]:
            nonlocal called
            called = True
            for chunk in self._stream(prompt, settings, grammar):
                yield chunk

    await HammerEngine(backend=Native(["hi"])).agenerate([Message.user("hi")])
    return called


# Ordered so that tests sharing the demo-tools prompt prefix run back to back: the server keeps
# only the last prompt's KV cache, and re-reading the ~600-token tools block is the slow part here.
def test_discovery_learns_model_kind_and_grammar_protocol(backend: OpenAICompatibleBackend) -> None:
    backend.load()
    assert backend.model_name == MODEL  # the only model the server lists, taken when none is named
    assert backend.server_kind == "llama_cpp_python"
    info = backend.info()
    # llama-cpp-python's server does not report n_ctx: the assumption is reported as such.
    assert info["context_window_source"] in ("assumed", "learned")
    assert backend.resolve_grammar_protocol() == "llama_cpp"
    assert "sk-" not in repr(backend.settings)  # the API key never shows in reprs or logs


def test_token_counts_come_from_the_servers_tokenizer(backend: OpenAICompatibleBackend, default_model_path: str,
                                                      server_engine: HammerEngine, demo_tools: list[Any]) -> None:
    import llama_cpp

    prompt = server_engine.render([Message.user("What's the weather in Paris?")], demo_tools)
    vocab = llama_cpp.Llama(model_path=default_model_path, vocab_only=True, verbose=False)
    local = len(vocab.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))
    assert backend.count_tokens(prompt) == local > 300  # special tokens parsed, as the model sees them


@pytest.mark.parametrize(("question", "tool", "expected"), CASES)
def test_questions_that_need_a_tool_get_the_right_call(server_engine: HammerEngine, demo_tools: list[Any], question: str,
                                                       tool: str, expected: dict[str, str]) -> None:
    out = ask(server_engine, question, demo_tools)
    assert out.kind == "tool_calls", out.raw
    call = out.tool_calls[0]
    assert call.name == tool
    for key, value in expected.items():
        assert call.arguments[key] == value
    assert out.finish_reason == "tool_calls" and out.model == MODEL
    prompt = server_engine.render([Message.user(question)], demo_tools)
    assert out.usage.prompt_tokens == server_engine.backend.count_tokens(prompt)
    assert out.usage.completion_tokens > 5


def test_unrelated_question_under_auto_is_refused(server_engine: HammerEngine, demo_tools: list[Any]) -> None:
    out = ask(server_engine, "Write a poem about the sea", demo_tools)
    assert out.kind == "refusal" and not out.tool_calls
    assert out.text == "Sorry, no tool is suitable for your request."


def test_the_server_applies_the_grammar(backend: OpenAICompatibleBackend, demo_tools: list[Any]) -> None:
    """A forced tool is always called under the server-side grammar; without it the model does not comply."""
    constrained = HammerEngine(backend=backend, max_tokens=96)
    out = ask(constrained, "Tell me a joke", demo_tools, tool_choice="send_email")
    assert out.kind == "tool_calls", out.raw
    assert {c.name for c in out.tool_calls} == {"send_email"}
    assert {"to", "subject", "body"} <= set(out.tool_calls[0].arguments)
    unconstrained = HammerEngine(backend=backend.with_options(grammar_protocol="none"), max_tokens=96)
    loose = ask(unconstrained, "Tell me a joke", demo_tools, tool_choice="send_email")
    assert loose.raw != out.raw  # same prompt, greedy: only the grammar can make the difference


def test_streaming_delivers_text_then_calls_then_the_response(server_engine: HammerEngine,
                                                              demo_tools: list[Any]) -> None:
    events = list(server_engine.stream([Message.user("Email bob@x.com saying hi")], tools=demo_tools))
    deltas = [e for e in events if isinstance(e, TextDelta)]
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    final = events[-1]
    assert isinstance(final, HammerResponse) and final.kind == "tool_calls"
    assert len(deltas) > 5 and "".join(d.text for d in deltas) == final.raw
    assert calls and calls[0].call.name == "send_email"
    assert events.index(calls[0]) < len(events) - 1  # the call arrived before the stream ended
    assert final.tool_calls[0].id == calls[0].call.id


async def test_async_stream(server_engine: HammerEngine, demo_tools: list[Any]) -> None:
    events = [e async for e in server_engine.astream([Message.user("What is 17 * 23?")], tools=demo_tools)]
    final = events[-1]
    assert isinstance(final, HammerResponse) and final.tool_calls[0].name == "calculate"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == final.raw


async def test_concurrent_async_calls_are_in_flight_together_and_answered_correctly(
        backend: OpenAICompatibleBackend, demo_tools: list[Any]) -> None:
    """Each answer belongs to its own request (no cross-wiring), and all four were at the server at once."""
    # Estimated token counts: llama-cpp-python's /extras/tokenize waits behind running generations,
    # which would stagger the requests and hide the concurrency measured here.
    backend = backend.with_options(token_counting="estimate")
    engine = HammerEngine(backend=backend, max_tokens=96)
    cities = ["Paris", "Tokyo", "Lima", "Oslo"]
    outs = await asyncio.gather(*(engine.agenerate([Message.user(f"What's the weather in {city}?")], tools=demo_tools)
                                  for city in cities))
    assert [(o.tool_calls[0].name, o.tool_calls[0].arguments["city"]) for o in outs] == [
        ("get_weather", city) for city in cities]
    assert backend.stats.peak_in_flight == 4


def test_a_server_that_ignores_the_grammar_field_is_detected(backend: OpenAICompatibleBackend,
                                                             demo_tools: list[Any]) -> None:
    """llama-cpp-python ignores vLLM's fields: the probe notices instead of decoding unconstrained."""
    wrong = backend.with_options(grammar_protocol="vllm")
    with pytest.raises(GrammarNotSupportedError, match=r"vllm: answered .*ignoring the grammar.*Fix"):
        ask(HammerEngine(backend=wrong), "What's the weather in Paris?", demo_tools)
    assert wrong.stats.completions == 1  # only the probe ran; the real request was never sent


def test_masked_names_are_mapped_back(server_engine: HammerEngine, demo_tools: list[Any]) -> None:
    out = ask(server_engine, "What's the weather in Paris?", demo_tools, mask_names=True)
    assert out.kind == "tool_calls", out.raw
    assert out.tool_calls[0].name == "get_weather" and out.tool_calls[0].arguments["city"] == "Paris"
    assert "get_weather" not in out.raw  # the server saw and answered with the opaque names


def test_sync_calls_from_threads_share_the_pool_without_a_lock(backend: OpenAICompatibleBackend) -> None:
    backend = backend.with_options(token_counting="estimate")  # see the test above
    engine = HammerEngine(backend=backend, max_tokens=8)
    barrier = threading.Barrier(3)
    results: dict[int, HammerResponse] = {}

    def work(i: int) -> None:
        barrier.wait()
        results[i] = engine.generate([Message.user(f"Repeat the number {i}.")])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=TIMEOUT)
    assert sorted(results) == [0, 1, 2] and all(r.kind == "text" and r.text for r in results.values())
    assert backend.stats.peak_in_flight == 3  # the base class's lock would have made this 1


async def test_the_engines_native_async_path_is_not_bounded_by_worker_threads(
        backend: OpenAICompatibleBackend) -> None:
    """Eight concurrent calls: more than the default thread pool (here min(32, cores + 4) = 6) allows."""
    assert await engine_calls_astream()  # the engine's native async path, not worker threads
    backend = backend.with_options(token_counting="estimate")  # see the test above
    engine = HammerEngine(backend=backend, max_tokens=4)
    outs = await asyncio.gather(*(engine.agenerate([Message.user(f"Say {i}.")]) for i in range(8)))
    assert all(o.kind == "text" for o in outs)
    assert backend.stats.peak_in_flight == 8


async def test_backend_astream_is_native(backend: OpenAICompatibleBackend, loop_ticker: Any) -> None:
    """The backend's own async stream runs on the loop: another task keeps running while it waits."""
    async with loop_ticker(0.01) as ticker:
        prompt = "<|im_start|>user\nCount from 1 to 5.<|im_end|>\n<|im_start|>assistant\n"
        chunks = [c async for c in backend.astream(prompt, GenerationSettings(max_tokens=24))]
    assert chunks[-1].finish_reason in ("stop", "length") and chunks[-1].usage is not None
    assert "".join(c.text for c in chunks) and ticker.ticks > 3


def test_per_call_settings_reach_the_server(llama_server: LlamaCppPythonServer) -> None:
    """max_tokens travels with the request: the server itself stops after 3 tokens and says why."""
    with OpenAICompatibleBackend(llama_server.base_url, model=MODEL, api_key=API_KEY, timeout=TIMEOUT) as backend:
        events = list(HammerEngine(backend=backend).stream([Message.user("Count from 1 to 50.")], max_tokens=3))
    final = events[-1]
    assert isinstance(final, HammerResponse) and final.finish_reason == "length"
    assert 1 <= len([e for e in events if isinstance(e, TextDelta)]) <= 3


def test_the_engine_builds_the_server_backend_by_name(llama_server: LlamaCppPythonServer) -> None:
    engine = HammerEngine(backend="server", base_url=llama_server.base_url, model=MODEL, api_key=API_KEY,
                          timeout=TIMEOUT, max_tokens=8)
    backend = engine.backend
    assert isinstance(backend, OpenAICompatibleBackend) and backend.base_url == llama_server.base_url[: -len("/v1")]
    out = engine.generate([Message.user("Say hi.")])
    assert out.kind == "text" and out.text and out.model == MODEL
