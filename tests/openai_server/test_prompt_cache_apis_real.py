"""Every API reports the prompt tokens the in-process prompt cache served, in its own field, on the real default
model (issue 59): four requests with instructions of their own, one per API, each displacing the one before;
then each again, restored from the kept states; ``/health`` shows the cache's size and hit rate."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx
import ollama
import openai
import pytest

from hammer_plugins import HammerEngine
from hammer_plugins.backends.llama_cpp import LlamaCppBackend
from hammer_plugins.openai_server import BackgroundServer, create_app

pytestmark = pytest.mark.real_model

KEY = "prompt-cache-key"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
QUESTION = "What's the weather in Paris?"


def _instructions(api: str) -> str:
    return " ".join(f"{api} rule {i}: answer with a tool call when one fits, else say so briefly." for i in range(8))


@pytest.fixture(scope="module")
def server(default_model_path: str) -> Iterator[BackgroundServer]:
    backend = LlamaCppBackend(default_model_path, n_ctx=2048, cache_ram=64)
    with BackgroundServer(create_app(HammerEngine(backend=backend, max_tokens=48), model_name="hammer",
                                     api_key=KEY)) as running:
        yield running


def _chat(oai: openai.OpenAI) -> int:
    reply = oai.chat.completions.create(model="hammer", messages=[
        {"role": "system", "content": _instructions("Chat")}, {"role": "user", "content": QUESTION}],
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}])
    return reply.usage.prompt_tokens_details.cached_tokens


def _responses(oai: openai.OpenAI) -> int:
    reply = oai.responses.create(model="hammer", instructions=_instructions("Responses"), input=QUESTION,
                                 tools=[{"type": "function", "name": "get_weather", "parameters": WEATHER}])
    return reply.usage.input_tokens_details.cached_tokens


def _messages(claude: anthropic.Anthropic) -> int:
    reply = claude.messages.create(model="hammer", max_tokens=48, system=_instructions("Messages"),
                                   messages=[{"role": "user", "content": QUESTION}],
                                   tools=[{"name": "get_weather", "input_schema": WEATHER}])
    return reply.usage.cache_read_input_tokens


def _ollama(client: ollama.Client) -> int:
    reply = client.chat(model="hammer", stream=False, messages=[
        {"role": "system", "content": _instructions("Ollama")}, {"role": "user", "content": QUESTION}],
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}}])
    return reply.prompt_eval_count  # Ollama's count: the prompt tokens evaluated


def test_each_api_reports_the_tokens_the_kept_states_served(server: BackgroundServer, oai: openai.OpenAI,
                                                            claude: anthropic.Anthropic) -> None:
    client = ollama.Client(host=server.url, headers={"authorization": f"Bearer {KEY}"})
    asks = {"chat": lambda: _chat(oai), "responses": lambda: _responses(oai), "messages": lambda: _messages(claude),
            "ollama": lambda: _ollama(client)}
    first = {api: ask() for api, ask in asks.items()}  # each displaces the one before: kept in memory
    again = {api: ask() for api, ask in asks.items()}  # each restored from the kept states
    for api in ("chat", "responses", "messages"):
        assert again[api] > first[api] + 100, (api, first, again)  # the instructions too, not just the tools
    assert again["ollama"] < 40 < first["ollama"]  # evaluated: the question's turn only
    health = httpx.get(server.url + "/health").json()["prompt_cache"]
    assert health["restored"] >= 4 and health["states"] >= 3 and 0 < health["bytes"] <= health["max_bytes"]
    assert 0 < health["hit_rate"] <= 1 and 0 < health["token_hit_rate"] < 1
