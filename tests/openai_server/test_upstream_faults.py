"""Faults of the model server behind the OpenAI-compatible API are the server's, never the client's.

A dead llama-server child, an upstream that refuses this API's key, answers 5xx or stays silent: the
client gets 502/503/504 with ``type: "server_error"`` and no internal address, /health says what is
wrong, and a supervised child that was killed (``kill -9``) is started again and serves the next
request. Genuine client errors stay 4xx. The upstream faults come from fault_proxy.py (tests/server),
a loopback proxy in front of a real llama-server child.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from hammer_plugins import HammerEngine
from hammer_plugins.backends.remote import OpenAICompatibleBackend
from hammer_plugins.http_api import BackgroundServer, create_app
from hammer_plugins.http_api.errors import engine_error
from hammer_plugins.launch import LlamaServer
from hammer_plugins.tools.definition import to_tools
from hammer_plugins.tools.demo import DEMO_TOOLS
from hammer_plugins.values.errors import (
    ContextWindowExceededError,
    GrammarNotSupportedError,
    SchemaConversionError,
    ServerAuthenticationError,
    ServerHTTPError,
    ServerModelNotFoundError,
    ServerStreamError,
    ServerTimeoutError,
    ServerUnavailableError,
    UnknownToolError,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))
from fault_proxy import FaultProxy  # noqa: E402

FAKE = Path(__file__).resolve().parents[1] / "server" / "fake_llama_server.py"

KEY = "outer-key"
INNER_KEY = "inner-key"
TOOLS = [t.to_openai() for t in to_tools(DEMO_TOOLS)]
URL = "http://127.0.0.1:43117/v1"
WEATHER = {"model": "hammer", "tools": TOOLS, "messages": [{"role": "user", "content": "What's the weather in Paris?"}]}


def assert_no_address(text: str, *ports: int) -> None:
    assert "127.0.0.1" not in text and "http://" not in text and "localhost" not in text, text
    for port in ports:
        assert str(port) not in text, text


@pytest.mark.parametrize(("error", "status", "code"), [
    (ServerUnavailableError(f"could not connect to the inference server at {URL}", url=URL), 503, "upstream_unavailable"),
    (ServerUnavailableError(f"the server at {URL} is unavailable (HTTP 503)", url=URL, status_code=503), 503,
     "upstream_unavailable"),
    (ServerTimeoutError(f"the server at {URL} sent nothing for 30 s", url=URL), 504, "upstream_timeout"),
    (ServerStreamError(f"the connection to the server at {URL} broke mid-stream", url=URL), 502,
     "upstream_connection_lost"),
    (ServerAuthenticationError(f"the server at {URL} refused (HTTP 401)", url=URL, status_code=401, detail="Invalid API Key"),
     502, "upstream_auth_failed"),
    (ServerHTTPError(f"the server at {URL} answered HTTP 500", url=URL, status_code=500, detail="boom"), 502, "upstream_error"),
    (ServerHTTPError(f"the server at {URL} is rate limiting", url=URL, status_code=429, detail="busy"), 503,
     "upstream_unavailable"),
    (ServerModelNotFoundError(f"the server at {URL} does not serve 'x'", url=URL, model="x"), 502, "upstream_misconfigured"),
    (GrammarNotSupportedError(f"the server at {URL} applied no grammar", url=URL), 502, "upstream_misconfigured"),
])
def test_upstream_failures_are_5xx_server_errors_naming_no_internal_address(error: Exception, status: int, code: str) -> None:
    mapped = engine_error(error)
    assert (mapped.status, mapped.type, mapped.code) == (status, "server_error", code)
    assert_no_address(mapped.message, 43117)
    assert "Fix:" in mapped.message
    assert (mapped.headers or {}).get("Retry-After") == ("5" if status == 503 else None)


@pytest.mark.parametrize(("error", "code"), [
    (ContextWindowExceededError(9000, 512, 4096), "context_length_exceeded"),
    (UnknownToolError("tool_choice 'x' is not among the bound tools"), "invalid_tool_choice"),
    (SchemaConversionError("f", "x.type", "unknown type 'complex'"), "invalid_tool_schema"),
    (ServerHTTPError(f"the server at {URL} answered HTTP 400", url=URL, status_code=400, detail="n_probs too large"),
     "upstream_rejected"),
])
def test_client_errors_stay_4xx(error: Exception, code: str) -> None:
    mapped = engine_error(error)
    assert (mapped.status, mapped.type, mapped.code) == (400, "invalid_request_error", code)
    assert_no_address(mapped.message, 43117)


def test_health_follows_a_supervised_child_down_and_back_up(tmp_path: Path) -> None:
    """/health's wiring to the launcher, on the stand-in binary (no model): 503 with the reason, then 200."""
    from hammer_plugins import ScriptedBackend

    fake = tmp_path / "llama-server"
    fake.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    fake.chmod(0o755)
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF" + bytes(64))
    child = LlamaServer(gguf, binary=fake, supervise=True, restart_backoff=(1.0, 30.0))
    app = create_app(HammerEngine(backend=ScriptedBackend([])), health_checks=[child.health_problem])
    with child, BackgroundServer(app) as server:
        assert httpx.get(server.url + "/health", trust_env=False).status_code == 200
        assert child.process is not None
        os.kill(child.process.pid, signal.SIGKILL)
        start = time.monotonic()
        while (health := httpx.get(server.url + "/health", trust_env=False)).status_code != 503:
            assert time.monotonic() - start < 1.0, "/health still ok 1 s after the child died"
            time.sleep(0.02)
        assert "exited with code -9; restarting (attempt 1)" in health.text
        assert_no_address(health.text, child.port)
        while httpx.get(server.url + "/health", trust_env=False).status_code != 200:
            assert time.monotonic() - start < 15.0, child.health_problem()
            time.sleep(0.05)
    assert child.restarts == 1


# ------------------------------------------------------------------------------ a real llama-server child
@pytest.fixture(scope="module")
def llama(default_model_path: str) -> Iterator[LlamaServer]:
    # A first back-off of 3 s: long enough that the requests sent while it is down reliably find it down.
    with LlamaServer(default_model_path, n_ctx=4096, parallel=2, model_alias="hammer", api_key=INNER_KEY,
                     supervise=True, restart_backoff=(3.0, 30.0)) as server:
        yield server


@contextmanager
def api(upstream: str, llama: LlamaServer | None = None, **options: Any) -> Iterator[BackgroundServer]:
    probed = OpenAICompatibleBackend(upstream, model="hammer", api_key=INNER_KEY, trust_env=False, timeout=300)
    probed.resolve_grammar_protocol()  # the one-off probe, before any fault is scripted (and not under a short timeout)
    backend = probed.with_options(**options) if options else probed  # keeps what the probe learned
    if backend is not probed:
        probed.close()
    checks = [llama.health_problem] if llama is not None else []
    with BackgroundServer(create_app(HammerEngine(backend=backend), model_name="hammer", api_key=KEY,
                                     health_checks=checks)) as running:
        yield running
    backend.close()


def chat(server: BackgroundServer, body: dict[str, Any] = WEATHER, timeout: float = 120) -> httpx.Response:
    return httpx.post(server.base_url + "/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"},
                      timeout=timeout, trust_env=False)


def assert_weather_call(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    call = response.json()["choices"][0]["message"]["tool_calls"][0]["function"]
    assert call["name"] == "get_weather" and json.loads(call["arguments"])["city"] == "Paris"


@pytest.mark.real_model
@pytest.mark.parametrize(("action", "status", "code"), [
    (("status", 401), 502, "upstream_auth_failed"),
    (("status", 500), 502, "upstream_error"),
    (("status", 503), 503, "upstream_unavailable"),
    (("stall", 6.0), 504, "upstream_timeout"),
])
def test_upstream_faults_reach_the_client_as_5xx_without_an_internal_address(
        llama: LlamaServer, action: tuple[Any, ...], status: int, code: str) -> None:
    timeout = 3.0 if action[0] == "stall" else 300.0
    with FaultProxy(llama.base_url) as proxy, api(proxy.base_url, max_retries=0, timeout=timeout) as server:
        proxy.script.append(action)
        failed = chat(server)
        assert failed.status_code == status, failed.text
        error = failed.json()["error"]
        assert (error["type"], error["code"]) == ("server_error", code)
        assert_no_address(error["message"], llama.port, proxy.server.server_address[1])
        if status == 503:
            assert failed.headers["retry-after"] == "5"
        if action[0] != "stall":  # (3 s is too short for a real answer on a busy machine)
            assert_weather_call(chat(server))  # the next request, with no fault, is served


@pytest.mark.real_model
def test_a_killed_child_is_503_with_health_503_then_restarted_and_serving(llama: LlamaServer) -> None:
    with api(llama.base_url, llama, max_retries=1, retry_backoff=0.1, timeout=120) as server:
        assert_weather_call(chat(server))
        assert httpx.get(server.url + "/health", trust_env=False).status_code == 200
        killed = llama.process
        assert killed is not None
        os.kill(killed.pid, signal.SIGKILL)
        start = time.monotonic()
        while (health := httpx.get(server.url + "/health", trust_env=False)).status_code != 503:
            assert time.monotonic() - start < 1.0, "/health still ok 1 s after the child died"
            time.sleep(0.02)
        to_health_503 = time.monotonic() - start
        assert "exited with code -9" in health.text and "restarting" in health.text
        assert_no_address(health.text, llama.port)

        down = chat(server)
        assert down.status_code == 503, down.text
        error = down.json()["error"]
        assert (error["type"], error["code"]) == ("server_error", "upstream_unavailable")
        assert down.headers["retry-after"] == "5"
        assert_no_address(down.text, llama.port)
        to_503 = time.monotonic() - start

        while httpx.get(server.url + "/health", trust_env=False).status_code != 200:
            assert time.monotonic() - start < 30.0, f"no restarted child within 30 s: {llama.health_problem()}"
            time.sleep(0.1)
        to_restarted = time.monotonic() - start
        assert llama.process is not killed and llama.restarts >= 1
        assert_weather_call(chat(server))
        to_served = time.monotonic() - start
    print(f"\nkill -9 -> /health 503: {to_health_503:.2f} s; a request answered 503: {to_503:.2f} s; child restarted "
          f"(/health 200): {to_restarted:.2f} s; a request served (200, tool call): {to_served:.2f} s")


@pytest.mark.real_model
def test_a_child_killed_mid_stream_ends_the_stream_with_a_server_error(llama: LlamaServer) -> None:
    llama_ready = time.monotonic()
    while llama.health_problem() is not None:  # after the previous test's restart
        assert time.monotonic() - llama_ready < 60
        time.sleep(0.1)
    body = {"model": "hammer", "stream": True, "max_tokens": 800,
            "messages": [{"role": "user", "content": "Write a long story about a dragon who learns to read."}]}
    with api(llama.base_url, llama, max_retries=1, retry_backoff=0.1, timeout=120) as server, \
            httpx.stream("POST", server.base_url + "/chat/completions", json=body, timeout=120, trust_env=False,
                         headers={"Authorization": f"Bearer {KEY}"}) as response:
        assert response.status_code == 200
        lines: list[str] = []
        killed = False
        for line in response.iter_lines():
            lines.append(line)
            if not killed and sum('"content"' in x for x in lines) == 3 and llama.process is not None:
                os.kill(llama.process.pid, signal.SIGKILL)
                killed = True
    errors = [json.loads(x[len("data: "):])["error"] for x in lines if x.startswith("data: {\"error\"")]
    assert errors and (errors[0]["type"], errors[0]["code"]) == ("server_error", "upstream_connection_lost")
    assert_no_address(errors[0]["message"], llama.port)
    assert [x for x in lines if x][-1] == "data: [DONE]"
