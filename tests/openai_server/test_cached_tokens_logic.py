"""Cached prompt tokens, one field (``usage.cached_prompt_tokens``) reported by every API the server speaks, read
by each API's official client: a scripted backend with a prefix cache (no model) is asked the same question
twice, and the second answer must say the cache served most of its prompt (issue 57: the Responses writer
read another name, so on llama-server and vLLM it always said 0)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import ollama
import openai
import pytest
from openai_server_helpers import scripted_answer

from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.openai_server import BackgroundServer, create_app

KEY = "cached-key"
QUESTION = "What's the weather in Paris?"
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
                                                 "parameters": WEATHER}}]
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather in a city.",
                    "parameters": WEATHER}]
ANTHROPIC_TOOLS = [{"name": "get_weather", "description": "Weather in a city.", "input_schema": WEATHER}]


@pytest.fixture(scope="module")
def backend() -> ScriptedBackend:
    return ScriptedBackend(responder=scripted_answer, prefix_cache=True)


@pytest.fixture(scope="module")
def server(backend: ScriptedBackend) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(HammerEngine(backend=backend), model_name="hammer", api_key=KEY)) as running:
        yield running


@pytest.fixture
def twice(backend: ScriptedBackend) -> Callable[[Callable[[], Any]], tuple[Any, Any]]:
    """The same request twice: first on a cold cache (the backend forgets its prompts), then on a warm one."""
    def ask_twice(ask: Callable[[], Any]) -> tuple[Any, Any]:
        backend.prompts.clear()
        return ask(), ask()
    return ask_twice


Twice = Callable[[Callable[[], Any]], tuple[Any, Any]]


def test_chat_completions_reports_cached_tokens(oai: openai.OpenAI, twice: Twice) -> None:
    cold, warm = twice(lambda: oai.chat.completions.create(
        model="hammer", messages=[{"role": "user", "content": QUESTION}], tools=CHAT_TOOLS))
    assert warm.usage.prompt_tokens == cold.usage.prompt_tokens and cold.usage.prompt_tokens_details.cached_tokens == 0
    assert 0.9 * warm.usage.prompt_tokens < warm.usage.prompt_tokens_details.cached_tokens < warm.usage.prompt_tokens
    chunks = list(oai.chat.completions.create(model="hammer", messages=[{"role": "user", "content": QUESTION}],
                                              tools=CHAT_TOOLS, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens == warm.usage.prompt_tokens_details.cached_tokens


def test_responses_reports_cached_tokens(oai: openai.OpenAI, twice: Twice) -> None:
    cold, warm = twice(lambda: oai.responses.create(model="hammer", input=QUESTION, tools=RESPONSES_TOOLS))
    assert warm.usage.input_tokens == cold.usage.input_tokens and cold.usage.input_tokens_details.cached_tokens == 0
    assert 0.9 * warm.usage.input_tokens < warm.usage.input_tokens_details.cached_tokens < warm.usage.input_tokens
    with oai.responses.stream(model="hammer", input=QUESTION, tools=RESPONSES_TOOLS) as stream:
        streamed = stream.get_final_response()
    assert streamed.usage.input_tokens_details.cached_tokens == warm.usage.input_tokens_details.cached_tokens


def test_messages_reports_cache_reads_apart_from_input_tokens(claude: anthropic.Anthropic, twice: Twice) -> None:
    """Anthropic's contract: ``input_tokens`` are the prompt tokens no cache served, so the prompt is
    ``input_tokens + cache_read_input_tokens`` (what langchain-anthropic adds up)."""
    cold, warm = twice(lambda: claude.messages.create(model="hammer", max_tokens=256, tools=ANTHROPIC_TOOLS,
                                                      messages=[{"role": "user", "content": QUESTION}]))
    prompt = cold.usage.input_tokens
    assert cold.usage.cache_read_input_tokens == 0
    assert warm.usage.input_tokens + warm.usage.cache_read_input_tokens == prompt
    assert 0.9 * prompt < warm.usage.cache_read_input_tokens < prompt and warm.usage.input_tokens >= 1
    with claude.messages.stream(model="hammer", max_tokens=256, tools=ANTHROPIC_TOOLS,
                                messages=[{"role": "user", "content": QUESTION}]) as stream:
        streamed = stream.get_final_message()
    assert streamed.usage.cache_read_input_tokens == warm.usage.cache_read_input_tokens
    assert streamed.usage.input_tokens == warm.usage.input_tokens


def test_ollama_counts_only_the_prompt_tokens_it_evaluated(server: BackgroundServer, twice: Twice) -> None:
    client = ollama.Client(host=server.url, headers={"authorization": f"Bearer {KEY}"})
    cold, warm = twice(lambda: client.chat(model="hammer", tools=CHAT_TOOLS,
                                           messages=[{"role": "user", "content": QUESTION}], stream=False))
    assert warm.message.tool_calls and 1 <= warm.prompt_eval_count < 0.1 * cold.prompt_eval_count
