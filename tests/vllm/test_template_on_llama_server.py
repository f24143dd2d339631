"""The Hammer chat template on llama.cpp's C++ llama-server (``--jinja --chat-template-file``), whose
Jinja engine is its own, not Python's: every BFCL prompt and the conversations with calls and
results render as the engine renders them (``/apply-template``), and after a tool result the server
answers in prose (docs/server.md, "llama-server with the same template").

A template construct that llama-server's engine reads differently fails here, not in a user's
server: ``namespace(items=...)`` did (``items`` is read as the dict method there), and only in the
tool-free branch, which llama-server renders on its own when it starts, to learn the template.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from typing import Any

import httpx
import pytest
from template_cases import TEMPLATE, bfcl_cases, conversation_case, conversation_cases

from hammer_plugins.launch import LlamaServer

pytestmark = pytest.mark.real_model

API_KEY = "sk-template-test"
AFTER_RESULT = conversation_case("with tools, 5 messages", failed_tool=False)  # ends with tool results


@pytest.fixture(scope="module")
def templated_server(default_model_path: str) -> Iterator[LlamaServer]:
    with LlamaServer(default_model_path, n_ctx=4096, parallel=1, model_alias="hammer", api_key=API_KEY,
                     extra_args=("--jinja", "--chat-template-file", str(TEMPLATE))) as server:
        yield server


def post(server: LlamaServer, path: str, body: dict[str, Any]) -> Any:
    response = httpx.post(server.base_url.removesuffix("/v1") + path, json=body, timeout=120, trust_env=False,
                          headers={"Authorization": f"Bearer {API_KEY}"})
    assert response.status_code == 200, f"{path}: {response.status_code} {response.text[:500]}"
    return response.json()


def test_llama_server_renders_what_the_engine_renders(templated_server: LlamaServer) -> None:
    """llama-server checks each tool's schema before it renders, and refuses BFCL's own type names
    (``float``, ``tuple``, ``any``; JSON Schema has none of them): those prompts are counted apart,
    each refusal must name the schema, and every prompt it does render must be byte-identical."""
    # Every 8th BFCL prompt (454 of 3,631, every category): llama-server builds a tool-call parser for
    # each request, 23 ms a prompt here; transformers and vLLM check all of them (test_chat_template.py,
    # test_vllm_real.py). A conversation that ends with the assistant's calls is not renderable there
    # ("Cannot continue an assistant message that contains tool calls"): llama-server reads it as a prefill.
    # Its chat API drops a tool message's "is_error", as vLLM's does (docs/server.md): no failed tool here.
    cases = [(case_id, messages, tools, {}, expected)
             for case_id, messages, tools, expected in islice(bfcl_cases(), 0, None, 8)]
    conversations = [case for case in conversation_cases(failed_tool=False) if case[1][-1]["role"] != "assistant"]
    cases += conversations
    root = templated_server.base_url.removesuffix("/v1")

    def outcome(case: tuple[str, Any, Any, dict[str, Any], str]) -> tuple[str, str]:
        case_id, messages, tools, kwargs, expected = case
        body: dict[str, Any] = {"messages": messages, "chat_template_kwargs": kwargs}
        if tools:
            body["tools"] = tools
        response = httpx.post(root + "/apply-template", json=body, timeout=120, trust_env=False,
                              headers={"Authorization": f"Bearer {API_KEY}"})
        if response.status_code == 400 and "JSON schema error" in response.text:
            return case_id, "schema refused"
        assert response.status_code == 200, f"{case_id}: {response.status_code} {response.text[:500]}"
        return case_id, "same" if response.json()["prompt"] == expected else "differs"

    with ThreadPoolExecutor(4) as pool:
        outcomes = dict(pool.map(outcome, cases))
    differing = [case_id for case_id, result in outcomes.items() if result == "differs"]
    rendered = sum(1 for result in outcomes.values() if result != "schema refused")
    print(f"\n{rendered} of {len(cases)} prompts rendered by llama-server (the rest: schemas it refuses)")
    assert all(outcomes[case[0]] != "schema refused" for case in conversations)
    assert rendered > 300, f"only {rendered} of {len(cases)} prompts were rendered"
    assert differing == [], f"{len(differing)} of {rendered} differ, e.g. {differing[:5]}"


def test_llama_server_answers_in_prose_after_a_tool_result(templated_server: LlamaServer) -> None:
    _, messages, tools, _, _ = AFTER_RESULT
    reply = post(templated_server, "/v1/chat/completions",
                 {"messages": messages, "tools": tools, "temperature": 0, "max_tokens": 96})
    message = reply["choices"][0]["message"]
    assert not message.get("tool_calls") and reply["choices"][0]["finish_reason"] == "stop", message
    # An answer to the question, not the tool's text parroted (what the old template got here: "18 C, sunny").
    assert "Paris" in message["content"] and re.search(r"sunny|18", message["content"], re.IGNORECASE), message
