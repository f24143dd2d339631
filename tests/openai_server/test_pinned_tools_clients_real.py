"""Pinning tools and seeing the selection, as an agent's author does it: ``hammer serve --openai --tool-budget 200
--log-level debug`` in its own process on the embedded default model, 30 tools (more than the budget holds, so the
selector narrows them), and each API's own client: ``openai`` (Chat Completions, plain and streamed; Responses),
``anthropic`` (Messages, streamed) and ``ollama`` (``/api/chat``). Each pins a tool the question does not need; the
answer's ``hammer_offered_tools`` holds it and fewer than all 30 tools, and the server's debug line names the same
selection. The conversion itself is tested without a model in test_pinned_tools_doors.py."""

from __future__ import annotations

import re
from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest
from openai_server_helpers import hammer_serve

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(600)]

KEY = "pin-key"
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOPICS = ["weather", "population", "time zone", "mayor", "altitude", "currency"]
FUNCTIONS = [{"name": f"city_{topic.replace(' ', '_')}_{i}", "description": f"The {topic} of a city (service {i}).",
              "parameters": CITY} for i in range(5) for topic in TOPICS]
"""30 tools of about 40 tokens each: more than the 200-token budget the server is given."""
PINNED = "city_mayor_4"
QUESTION = "What is the weather in Paris?"
MAX_TOKENS = 48  # a call is about 20 tokens: the field is the point, not a long answer


def _offered(offered: Any) -> list[str]:
    assert isinstance(offered, list), offered
    assert PINNED in offered and 1 < len(offered) < len(FUNCTIONS), offered
    assert set(offered) <= {f["name"] for f in FUNCTIONS}, offered
    return offered


def test_each_api_client_pins_a_tool_and_reads_which_tools_were_offered(default_model_path: str) -> None:
    env = {"HAMMER_SERVER_API_KEY": KEY, "HAMMER_MODEL_PATH": default_model_path}
    argv = ["--openai", "--n-ctx", "4096", "--tool-budget", "200", "--log-level", "debug"]
    seen: dict[str, list[str]] = {}
    with hammer_serve(argv, env, startup=120) as served:
        oai = openai.OpenAI(base_url=served.base_url, api_key=KEY, max_retries=0, timeout=300)
        question = [{"role": "user", "content": QUESTION}]
        chat_tools = [{"type": "function", "function": f} for f in FUNCTIONS]
        pin = {"pinned_tools": [PINNED]}
        reply = oai.chat.completions.create(model="hammer", messages=question, tools=chat_tools,  # type: ignore[arg-type]
                                            max_tokens=MAX_TOKENS, extra_body=pin)
        seen["chat"] = _offered(reply.model_extra["hammer_offered_tools"])
        chunks = list(oai.chat.completions.create(model="hammer", messages=question, tools=chat_tools,  # type: ignore[arg-type]
                                                  max_tokens=MAX_TOKENS, extra_body=pin, stream=True))
        [finish] = [c for c in chunks if c.choices and c.choices[0].finish_reason]
        seen["chat streamed"] = _offered(finish.model_extra["hammer_offered_tools"])
        # A pin that names no tool: the SDK's 400, naming the field.
        with pytest.raises(openai.BadRequestError) as bad:
            oai.chat.completions.create(model="hammer", messages=question, tools=chat_tools,  # type: ignore[arg-type]
                                        extra_body={"pinned_tools": ["city_mayor_9"]})
        assert bad.value.body["param"] == "pinned_tools[0]" and "city_mayor_9" in bad.value.body["message"]

        response = oai.responses.create(model="hammer", input=QUESTION, max_output_tokens=MAX_TOKENS,
                                        tools=[{"type": "function", **f} for f in FUNCTIONS],  # type: ignore[misc]
                                        extra_body=pin)
        seen["responses"] = _offered(response.model_extra["hammer_offered_tools"])

        claude = anthropic.Anthropic(base_url=served.base_url.removesuffix("/v1"), api_key=KEY, max_retries=0,
                                     timeout=300)
        anthropic_tools = [{"name": f["name"], "description": f["description"], "input_schema": CITY}
                           for f in FUNCTIONS]
        events = list(claude.messages.create(model="hammer", max_tokens=MAX_TOKENS, messages=question,  # type: ignore[arg-type]
                                             tools=anthropic_tools, stream=True, extra_body=pin))  # type: ignore[arg-type]
        [delta] = [e for e in events if e.type == "message_delta"]
        seen["messages streamed"] = _offered(delta.model_extra["hammer_offered_tools"])

        # Ollama's client sends only Ollama's fields but passes options through; it drops fields it does not know
        # from the answer, so the answer's field is read as the raw line (an httpx hook sees it).
        lines: list[dict[str, Any]] = []

        def keep(reply: httpx.Response) -> None:
            if reply.request.url.path == "/api/chat":
                reply.read()
                lines.append(reply.json())

        local = ollama.Client(host=served.base_url.removesuffix("/v1"), timeout=300,
                              headers={"Authorization": f"Bearer {KEY}"}, event_hooks={"response": [keep]})
        answer = local.chat(model="hammer", messages=question, tools=chat_tools,
                            options={"num_predict": MAX_TOKENS, "pinned_tools": [PINNED]})
        assert answer.done
        seen["ollama"] = _offered(lines[-1]["hammer_offered_tools"])
    assert served.code == 0, served.output
    selections = [line for line in served.output.splitlines()
                  if "DEBUG hammer_plugins.engine.tool_selection: offered " in line]
    assert len(selections) >= len(seen), served.output
    for line in selections:
        assert re.search(rf"offered \d+ of 30 tools \(\d+ of [\d,]+ estimated tokens\): .*{PINNED}", line), line
    # What each client read is a selection the server's log names (a refusal's widened pass logs its own line).
    for door, names in seen.items():
        assert any(line.endswith(": " + ", ".join(names)) or ": " + ", ".join(names) + " (" in line
                   for line in selections), (door, names, selections)
    print(f"\noffered with {PINNED} pinned: {seen['chat']}")
