"""Failures against real servers on loopback: down, unreachable, slow, refusing, overloaded, cut off.

A closed port (no server at all) is test_server_units.py's. Faults a real server does not produce on
demand (503, 429, a stream cut by a proxy) come from a loopback proxy in front of the real server
(``fault_proxy.py``). A second, expendable server is killed mid-stream.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fault_proxy import FaultProxy
from serverenv import API_KEY, MODEL, TIMEOUT, stream_then_kill

from hammer_plugins import ContextWindowExceededError, HammerEngine, HammerResponse, Message, TextDelta
from hammer_plugins.backends.remote import OpenAICompatibleBackend
from hammer_plugins.launch import LlamaCppPythonServer
from hammer_plugins.values.errors import (
    ServerAuthenticationError,
    ServerHTTPError,
    ServerModelNotFoundError,
    ServerStreamError,
    ServerTimeoutError,
    ServerUnavailableError,
)

pytestmark = pytest.mark.real_model

HI = [Message.user("Say hi.")]
LONG = [Message.user("Count from 1 to 100, one number per line.")]


# ------------------------------------------------------------------------ refused
@pytest.mark.parametrize("key", [None, "sk-wrong"])
def test_a_missing_or_wrong_api_key_is_named(llama_server: LlamaCppPythonServer, key: str | None) -> None:
    backend = OpenAICompatibleBackend(llama_server.base_url, api_key=key, max_retries=0, trust_env=False)
    with pytest.raises(ServerAuthenticationError, match="HTTP 401.*Fix: pass api_key") as caught:
        HammerEngine(backend=backend).generate(HI)
    assert caught.value.status_code == 401 and backend.stats.retries == 0


def test_a_model_name_the_server_does_not_serve_is_caught(llama_server: LlamaCppPythonServer) -> None:
    """llama-cpp-python would silently answer with its default model; the backend refuses first."""
    backend = OpenAICompatibleBackend(llama_server.base_url, model="Hammer2.1-7b", api_key=API_KEY, trust_env=False)
    expected = r"does not serve model 'Hammer2.1-7b'.*Fix: pass model='hammer-test'"
    with pytest.raises(ServerModelNotFoundError, match=expected) as caught:
        HammerEngine(backend=backend).generate(HI)
    assert caught.value.available == [MODEL]


# ------------------------------------------------------------------------------- limits
def test_a_tiny_timeout_is_a_clear_error_and_not_retried(backend: OpenAICompatibleBackend) -> None:
    backend.load()
    hasty = backend.with_options(timeout=0.001, token_counting="estimate")  # only the completion is sent
    started = time.perf_counter()
    with pytest.raises(ServerTimeoutError, match=r"sent nothing for 0.001 s .*not retried.*Fix: raise timeout="):
        HammerEngine(backend=hasty).generate(HI, max_tokens=8)
    assert hasty.stats.requests == 1 and hasty.stats.retries == 0
    assert time.perf_counter() - started < 5


def test_a_prompt_over_the_servers_context_is_a_context_error_and_the_window_is_learned(
        llama_server: LlamaCppPythonServer) -> None:
    backend = OpenAICompatibleBackend(llama_server.base_url, api_key=API_KEY, timeout=TIMEOUT, trust_env=False)
    engine = HammerEngine(backend=backend, max_tokens=32)
    messages = [Message.user("lorem ipsum dolor sit amet " * 1100)]  # about 5,500 tokens; the server has 4,096
    with pytest.raises(ContextWindowExceededError, match="context window is 4096 tokens") as caught:
        engine.generate(messages)
    assert caught.value.prompt_tokens > 4096 and caught.value.context_window == 4096
    assert backend.context_window == 4096 and backend.info()["context_window_source"] == "learned"
    sent = backend.stats.requests
    with pytest.raises(ContextWindowExceededError):
        engine.generate(messages)  # now caught before anything is sent
    assert backend.stats.requests == sent


# ------------------------------------------------------------------- faults from a proxy
@pytest.fixture
def proxy(llama_server: LlamaCppPythonServer) -> Iterator[FaultProxy]:
    with FaultProxy(llama_server.base_url) as running:
        yield running


def proxied(proxy: FaultProxy, **options: Any) -> OpenAICompatibleBackend:
    # The grammar protocol is given, so no probe request consumes a scripted fault.
    settings: dict[str, Any] = {"api_key": API_KEY, "timeout": TIMEOUT, "retry_backoff": 0.05, "trust_env": False,
                                "grammar_protocol": "llama_cpp", "verify_grammar": False, **options}
    return OpenAICompatibleBackend(proxy.base_url, **settings)


def test_503s_are_retried_with_backoff_until_the_server_answers(proxy: FaultProxy) -> None:
    proxy.script = [("status", 503), ("status", 503)]
    backend = proxied(proxy, max_retries=2)
    out = HammerEngine(backend=backend).generate(HI, max_tokens=8)
    assert out.kind == "text" and out.text
    assert proxy.completion_requests == 3 and backend.stats.retries == 2


def test_429_retry_after_is_honoured(proxy: FaultProxy) -> None:
    proxy.script = [("status", 429, {"Retry-After": "1"})]
    backend = proxied(proxy, max_retries=1, max_backoff=5)
    started = time.perf_counter()
    out = HammerEngine(backend=backend).generate(HI, max_tokens=8)
    assert out.text and proxy.completion_requests == 2
    assert time.perf_counter() - started >= 1.0


def test_503s_past_the_retry_budget_are_unavailable(proxy: FaultProxy) -> None:
    proxy.script = [("status", 503)] * 3
    backend = proxied(proxy, max_retries=2)
    with pytest.raises(ServerUnavailableError, match=r"HTTP 503 .*still after the retries"):
        HammerEngine(backend=backend).generate(HI, max_tokens=8)
    assert proxy.completion_requests == 3


def test_a_500_is_not_retried(proxy: FaultProxy) -> None:
    proxy.script = [("status", 500)]
    backend = proxied(proxy, max_retries=3)
    with pytest.raises(ServerHTTPError, match="HTTP 500 on /v1/completions: injected HTTP 500") as caught:
        HammerEngine(backend=backend).generate(HI, max_tokens=8)
    assert caught.value.status_code == 500 and proxy.completion_requests == 1


def test_a_stream_cut_mid_way_is_an_error_carrying_the_partial_text(proxy: FaultProxy) -> None:
    proxy.script = [("cut", 3)]
    backend = proxied(proxy, max_retries=3)
    seen: list[str] = []
    with pytest.raises(ServerStreamError, match="broke mid-stream .*not retried") as caught:
        for event in HammerEngine(backend=backend).stream(LONG, max_tokens=64):
            if isinstance(event, TextDelta):
                seen.append(event.text)
    # Three events passed the proxy (an event may carry no text, e.g. a keep-alive ping).
    assert 1 <= len(seen) <= 3 and caught.value.partial_text.startswith("".join(seen))
    assert proxy.completion_requests == 1  # text had already streamed: never retried


def test_the_request_on_the_wire(proxy: FaultProxy, demo_tools: list[Any]) -> None:
    """What the server receives: our raw ChatML prompt, the grammar in llama.cpp's field, ChatML stops."""
    proxy.script = [("status", 400)]  # recorded by the proxy, never reaches the model
    backend = proxied(proxy, max_retries=0)
    engine = HammerEngine(backend=backend, max_tokens=100, seed=7)
    with pytest.raises(ServerHTTPError):
        engine.generate([Message.user("Weather in Paris?")], tools=demo_tools)
    body = proxy.completion_bodies[-1]
    assert body["model"] == MODEL and body["stream"] is True and body["seed"] == 7
    assert body["prompt"] == engine.render([Message.user("Weather in Paris?")], demo_tools)
    assert body["prompt"].endswith("<|im_start|>assistant\n")
    assert body["grammar"] == engine.bind(demo_tools).grammar("auto", True).gbnf
    assert "<|im_end|>" in body["stop"] and body["temperature"] == 0.0 and body["max_tokens"] <= 100
    # llama.cpp's sampling field names
    assert body["top_k"] == 0 and body["repeat_penalty"] == engine.settings.repeat_penalty


# ----------------------------------------------------------- a server that goes away
@pytest.fixture(scope="module")
def victim(default_model_path: str) -> Iterator[LlamaCppPythonServer]:
    """An expendable server with llama-cpp-python's default interrupt_requests=True; killed by a test."""
    server = LlamaCppPythonServer(default_model_path, n_ctx=2048, model_alias=MODEL, interrupt_requests=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_a_stream_interrupted_by_another_request_is_an_error_naming_the_setting(victim: LlamaCppPythonServer) -> None:
    backend = OpenAICompatibleBackend(victim.base_url, timeout=TIMEOUT, trust_env=False)
    engine = HammerEngine(backend=backend)
    engine.load()
    seen: list[str] = []
    other: list[HammerResponse] = []
    # The server cuts the connection (or, in some versions, sends [DONE] with no finish_reason).
    with pytest.raises(ServerStreamError, match="--interrupt_requests False") as caught:
        for event in engine.stream(LONG, max_tokens=200):
            if isinstance(event, TextDelta):
                seen.append(event.text)
                if len(seen) == 2:  # mid-answer, a second client arrives
                    worker = threading.Thread(target=lambda: other.append(engine.generate(HI, max_tokens=4)))
                    worker.start()
    worker.join(timeout=TIMEOUT)
    # The engine may hold back trailing whitespace of plain text, so what it showed is a prefix.
    assert caught.value.partial_text.startswith("".join(seen)) and 2 <= len(seen) < 200
    assert other and other[0].kind == "text"  # the request that interrupted it was answered


def test_a_server_killed_mid_stream_then_down(victim: LlamaCppPythonServer) -> None:
    backend = OpenAICompatibleBackend(victim.base_url, timeout=TIMEOUT, max_retries=1, retry_backoff=0.05,
                                      trust_env=False)
    engine = HammerEngine(backend=backend)
    seen, error = stream_then_kill(engine, victim, LONG)
    assert "broke mid-stream" in str(error)
    assert error.partial_text.startswith("".join(seen)) and len(seen) >= 3
    with pytest.raises(ServerUnavailableError, match="could not connect"):
        engine.generate(HI)
