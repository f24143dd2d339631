"""Cached tokens count only what was loaded or reused, never what was evaluated (issue 60), on every API.

The red team's case: on an empty prefix-cache folder, the first request reported ``cached_tokens`` 186 of 195,
the length of the shared head it had just evaluated. Here each API gets a server of its own on the real
default model, with an empty cache folder and no states in memory; its first request (system instructions, a
tool) must report 0 cached tokens in that API's field, and the same request again must report most of its
prompt (the head found in the context). Ollama reports the tokens it evaluated: all of the first prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import ollama
import openai
import pytest

from hammer_plugins import HammerEngine
from hammer_plugins.backends.llama_cpp import LlamaCppBackend
from hammer_plugins.openai_server import BackgroundServer, create_app

pytestmark = pytest.mark.real_model

KEY = "empty-cache-key"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
SYSTEM = "You help travellers. Answer with a tool call when one fits, else say so briefly."
QUESTION = "What's the weather in Paris?"


def _chat(server: BackgroundServer) -> tuple[int, int]:
    reply = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0).chat.completions.create(
        model="hammer", messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}])
    return reply.usage.prompt_tokens_details.cached_tokens, reply.usage.prompt_tokens


def _responses(server: BackgroundServer) -> tuple[int, int]:
    reply = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0).responses.create(
        model="hammer", instructions=SYSTEM, input=QUESTION,
        tools=[{"type": "function", "name": "get_weather", "parameters": WEATHER}])
    return reply.usage.input_tokens_details.cached_tokens, reply.usage.input_tokens


def _messages(server: BackgroundServer) -> tuple[int, int]:
    client = anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key=KEY, max_retries=0)
    reply = client.messages.create(model="hammer", max_tokens=32, system=SYSTEM,
                                   messages=[{"role": "user", "content": QUESTION}],
                                   tools=[{"name": "get_weather", "input_schema": WEATHER}])
    read = reply.usage.cache_read_input_tokens or 0
    return read, reply.usage.input_tokens + read  # Anthropic's input_tokens leave the cache reads out


def _ollama(server: BackgroundServer) -> tuple[int, int]:
    reply = ollama.Client(host=server.url, headers={"authorization": f"Bearer {KEY}"}).chat(
        model="hammer", stream=False, messages=[{"role": "system", "content": SYSTEM},
                                                {"role": "user", "content": QUESTION}],
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}])
    return -1, reply.prompt_eval_count  # Ollama's count: the prompt tokens evaluated


ASKS: dict[str, Callable[[BackgroundServer], tuple[int, int]]] = {
    "chat": _chat, "responses": _responses, "messages": _messages, "ollama": _ollama}


@pytest.mark.parametrize("api", list(ASKS))
def test_the_first_request_on_an_empty_cache_folder_reports_nothing_cached(default_model_path: str, tmp_path: Path,
                                                                          api: str) -> None:
    backend = LlamaCppBackend(default_model_path, n_ctx=2048, prefix_cache=tmp_path / "kv", cache_ram=0)
    engine: Any = HammerEngine(backend=backend, max_tokens=32)
    with BackgroundServer(create_app(engine, model_name="hammer", api_key=KEY)) as server:
        first = ASKS[api](server)
        again = ASKS[api](server)
    assert list((tmp_path / "kv").glob("*.kv")), "the first request stored its head: it was evaluated"
    if api == "ollama":
        assert first[1] > 100 and again[1] < 40, (first, again)  # evaluated: all, then the question's turn only
        return
    assert first[0] == 0, (api, first)
    assert again[0] > again[1] - 40, (api, again)  # the head, found in the context
