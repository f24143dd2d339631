"""One real llama-cpp-python OpenAI-compatible server for the whole session, on loopback.

It serves the embedded default model (Qwen2.5-Coder-0.5B-Instruct, the base of Hammer2.1-0.5b)
under the name ``hammer-test``, requires an API key (so every test exercises authentication), and
runs with ``--interrupt_requests False`` as docs/server.md recommends. It is always stopped at the
end of the session, and dies with the test process if that crashes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from serverenv import API_KEY, MODEL, TIMEOUT

from hammer_plugins import HammerEngine
from hammer_plugins.backends.remote import OpenAICompatibleBackend
from hammer_plugins.launch import LlamaCppPythonServer


@pytest.fixture(scope="session")
def llama_server(default_model_path: str) -> Iterator[LlamaCppPythonServer]:
    server = LlamaCppPythonServer(default_model_path, n_ctx=4096, model_alias=MODEL, api_key=API_KEY)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def backend(llama_server: LlamaCppPythonServer) -> Iterator[OpenAICompatibleBackend]:
    with OpenAICompatibleBackend(llama_server.base_url, api_key=API_KEY, timeout=TIMEOUT, trust_env=False) as shared:
        yield shared


@pytest.fixture(scope="session")
def server_engine(backend: OpenAICompatibleBackend) -> HammerEngine:
    """Greedy, like the in-process real-model tests, so answers are reproducible."""
    return HammerEngine(backend=backend, max_tokens=160)
