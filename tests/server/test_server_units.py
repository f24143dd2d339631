"""The server backend without a server: its wire formats and error mapping (vLLM's and llama-server's request
fields and error bodies, taken from their sources and documentation), and a closed port. The real servers
(llama-cpp-python's, llama-server, vLLM) are exercised in the other test files.
"""

from __future__ import annotations

import socket
import time

import pydantic
import pytest

from hammer_plugins import ContextWindowExceededError, HammerEngine, Message
from hammer_plugins.backends.base import GenerationSettings
from hammer_plugins.backends.remote import OpenAICompatibleBackend
from hammer_plugins.backends.remote.grammar_probe import grammar_fields
from hammer_plugins.backends.remote.wire import _CompletionReader, _SSEDecoder
from hammer_plugins.values.errors import (
    ServerAuthenticationError,
    ServerHTTPError,
    ServerModelNotFoundError,
    ServerStreamError,
    ServerUnavailableError,
)

GRAMMAR = 'root ::= "[]"'


# ------------------------------------------------------------------------------- settings
@pytest.mark.parametrize("url", ["http://127.0.0.1:8000", "http://127.0.0.1:8000/", "http://127.0.0.1:8000/v1",
                                 " http://127.0.0.1:8000/v1/ "])
def test_base_url_may_be_the_root_or_the_v1_url(url: str) -> None:
    assert OpenAICompatibleBackend(url).base_url == "http://127.0.0.1:8000"


def test_a_path_prefix_behind_a_proxy_is_kept() -> None:
    assert OpenAICompatibleBackend("https://gw.example/llm/v1").base_url == "https://gw.example/llm"


def test_bad_settings_fail_at_construction_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(pydantic.ValidationError, match="must start with http"):
        OpenAICompatibleBackend("127.0.0.1:8000")
    with pytest.raises(pydantic.ValidationError, match="max_retrys"):
        OpenAICompatibleBackend("http://127.0.0.1:8000", max_retrys=3)  # a typo is not silently ignored
    with pytest.raises(pydantic.ValidationError, match="grammar_protocol"):
        OpenAICompatibleBackend("http://127.0.0.1:8000", grammar_protocol="sglang")
    monkeypatch.delenv("HAMMER_SERVER_URL", raising=False)
    with pytest.raises(ValueError, match="needs base_url.*HAMMER_SERVER_URL"):
        OpenAICompatibleBackend()


def test_url_and_key_from_the_environment_and_the_key_stays_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HAMMER_SERVER_URL", "http://127.0.0.1:9000/v1")
    monkeypatch.setenv("HAMMER_SERVER_API_KEY", "sk-secret-123")
    backend = OpenAICompatibleBackend()
    assert backend.base_url == "http://127.0.0.1:9000"
    assert backend.settings.api_key is not None and backend.settings.api_key.get_secret_value() == "sk-secret-123"
    assert "sk-secret-123" not in repr(backend.settings) and "sk-secret-123" not in str(backend.info())
    assert backend._connection.client_options()["headers"]["Authorization"] == "Bearer sk-secret-123"


def test_nothing_is_contacted_before_the_first_call() -> None:
    backend = OpenAICompatibleBackend("http://127.0.0.1:9", model="hammer")  # port 9: nothing listens
    assert backend.model_name == "hammer" and not backend.is_loaded
    assert backend.info()["server_kind"] == "auto" and backend.stats.requests == 0


def test_with_options_validates_and_keeps_the_other_settings() -> None:
    base = OpenAICompatibleBackend("http://127.0.0.1:8000", model="m", api_key="k", max_retries=5)
    changed = base.with_options(timeout=3)
    assert changed.settings.timeout == 3.0 and changed.settings.max_retries == 5 and changed.settings.model == "m"
    assert changed.settings.api_key is not None and changed.settings.api_key.get_secret_value() == "k"
    with pytest.raises(pydantic.ValidationError):
        base.with_options(timeout=-1)


# -------------------------------------------------------------------------- request bodies
def body_for(kind: str, protocol: str, **settings: object) -> dict[str, object]:
    backend = OpenAICompatibleBackend("http://127.0.0.1:8000", model="hammer", server_kind=kind)  # type: ignore[arg-type]
    fields = grammar_fields(protocol, GRAMMAR)  # type: ignore[arg-type]
    return backend._completion_body("PROMPT", GenerationSettings(**settings), fields)  # type: ignore[arg-type]


def test_each_grammar_protocol_uses_its_servers_field() -> None:
    assert body_for("llama_server", "llama_cpp")["grammar"] == GRAMMAR
    assert body_for("vllm", "vllm")["structured_outputs"] == {"grammar": GRAMMAR}
    assert body_for("vllm", "vllm_guided")["guided_grammar"] == GRAMMAR
    unconstrained = body_for("vllm", "none")
    assert not {"grammar", "structured_outputs", "guided_grammar"} & set(unconstrained)


def test_sampling_fields_use_each_servers_names() -> None:
    llama = body_for("llama_server", "none", top_k=0, repeat_penalty=1.1, seed=3, stop=["END"])
    assert (llama["top_k"], llama["repeat_penalty"], llama["repeat_last_n"], llama["seed"]) == (0, 1.1, 64, 3)
    assert llama["stop"] == ["<|im_end|>", "<|endoftext|>", "<|im_start|>", "END"]
    assert llama["prompt"] == "PROMPT" and llama["model"] == "hammer" and llama["stream"] is True
    vllm = body_for("vllm", "none", top_k=0, repeat_penalty=1.1)
    assert vllm["top_k"] == -1  # vLLM's "disabled"
    assert "repetition_penalty" not in vllm and "repeat_penalty" not in vllm  # whole-prompt penalty: opt-in only
    generic = body_for("openai", "none")  # a strict OpenAI-compatible server gets only standard fields
    assert not {"top_k", "repeat_penalty", "repetition_penalty", "repeat_last_n"} & set(generic)


def test_extra_body_is_merged_last() -> None:
    backend = OpenAICompatibleBackend("http://127.0.0.1:8000", model="m", server_kind="vllm",
                                      extra_body={"repetition_penalty": 1.05, "min_p": 0.1})
    body = backend._completion_body("P", GenerationSettings(), {})
    assert body["repetition_penalty"] == 1.05 and body["min_p"] == 0.1


# ------------------------------------------------------------------------------ streaming
def test_sse_decoder_joins_data_lines_and_skips_comments() -> None:
    decoder = _SSEDecoder()
    lines = [": ping - 2026-01-01", "", "data: {\"a\":", "data: 1}", "", "error: {\"message\": \"boom\"}", "",
             "data: [DONE]"]
    events = [e for e in (decoder.feed(line) for line in lines) if e]
    assert events == [("message", '{"a":\n1}'), ("error", '{"message": "boom"}')]
    assert decoder.flush() == ("message", "[DONE]")  # a last event without its blank line still counts


def test_reader_uses_the_servers_usage_when_sent() -> None:
    reader = _CompletionReader("http://x")
    assert reader.on_event("message", '{"choices": [{"index": 0, "text": "[]", "finish_reason": null}]}') == "[]"
    reader.on_event("message", '{"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}')
    reader.on_event("message", '{"choices": [], "usage": {"prompt_tokens": 600, "completion_tokens": 2}}')
    final = reader.final(prompt_tokens=None, max_tokens=64)
    assert final.finish_reason == "stop" and final.usage is not None
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (600, 2)


@pytest.mark.parametrize(("last_event", "cached"), [
    # llama-server: its prompt cache held cache_n tokens, it evaluated prompt_n
    ('{"choices": [], "usage": {"prompt_tokens": 600, "completion_tokens": 2}, '
     '"timings": {"cache_n": 590, "prompt_n": 10}}', 590),
    # vLLM (--enable-prompt-tokens-details), OpenAI: the usage's own field
    ('{"choices": [], "usage": {"prompt_tokens": 600, "completion_tokens": 2, '
     '"prompt_tokens_details": {"cached_tokens": 512}}}', 512),
    ('{"choices": [], "usage": {"prompt_tokens": 600, "completion_tokens": 2}}', 0),  # a server that does not say
])
def test_reader_reports_the_servers_cached_prompt_tokens_under_the_one_name(last_event: str, cached: int) -> None:
    reader = _CompletionReader("http://x")
    reader.on_event("message", '{"choices": [{"index": 0, "text": "[]", "finish_reason": "stop"}]}')
    reader.on_event("message", last_event)
    usage = reader.final(prompt_tokens=None, max_tokens=64).usage
    assert usage is not None and (usage.cached_prompt_tokens, usage.evaluated_prompt_tokens) == (cached, 600 - cached)


@pytest.mark.parametrize(("events", "needle"), [
    (['{"choices": [{"index": 0, "text": "[{", "finish_reason": null}]}', "[DONE]"], r"\[DONE\] but no finish_reason"),
    (['{"choices": [{"index": 0, "text": "[{", "finish_reason": "abort"}]}'], "aborted the request"),
])
def test_an_answer_that_never_finished_is_an_error_with_the_partial_text(events: list[str], needle: str) -> None:
    reader = _CompletionReader("http://x")
    for data in events:
        reader.on_event("message", data)
    with pytest.raises(ServerStreamError, match=needle) as caught:
        reader.final(prompt_tokens=10, max_tokens=64)
    assert caught.value.partial_text == "[{"


def test_an_error_inside_the_stream_is_raised() -> None:
    reader = _CompletionReader("http://x")
    with pytest.raises(ServerStreamError, match="mid-stream: out of memory"):
        reader.on_event("message", '{"error": {"message": "out of memory", "type": "InternalServerError"}}')
    with pytest.raises(ServerStreamError, match="malformed stream event"):
        reader.on_event("message", "<html>")


# --------------------------------------------------------------------------- error bodies
BACKEND = OpenAICompatibleBackend("http://127.0.0.1:8000", model="hammer")


@pytest.mark.parametrize(("body", "prompt", "completion", "window"), [
    # llama-cpp-python
    ('{"error": {"message": "This model\'s maximum context length is 4096 tokens, however you requested 5006 tokens '
     '(5001 in your prompt; 5 for the completion). Please reduce your prompt; or completion length.", '
     '"type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}', 5001, 5, 4096),
    # vLLM (older wording)
    ('{"object": "error", "message": "This model\'s maximum context length is 2048 tokens. However, you requested '
     '3000 tokens (2500 in the messages, 500 in the completion). Please reduce the length of the messages or '
     'completion.", "type": "BadRequestError", "param": null, "code": 400}', 2500, 500, 2048),
    # vLLM (newer wording)
    ('{"error": {"message": "This model\'s maximum context length is 4096 tokens. However, your request has 5000 '
     'input tokens. Please reduce the length of the input messages.", "type": "BadRequestError", "code": 400}}',
     5000, 77, 4096),
    # llama-server
    ('{"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", '
     '"type": "exceed_context_size_error", "n_prompt_tokens": 9000, "n_ctx": 8192}}', 9000, 77, 8192),
])
def test_each_servers_context_overflow_becomes_a_context_window_error(body: str, prompt: int, completion: int,
                                                                       window: int) -> None:
    error = BACKEND.with_options()._fail(400, body, "/v1/completions", max_tokens=77)
    assert isinstance(error, ContextWindowExceededError)
    assert (error.prompt_tokens, error.max_new_tokens, error.context_window) == (prompt, completion, window)


def test_a_learned_context_window_never_overrides_a_setting() -> None:
    backend = OpenAICompatibleBackend("http://127.0.0.1:8000", model="m", context_window=2048)
    backend._fail(400, '{"error": {"message": "maximum context length is 4096 tokens", "code": '
                       '"context_length_exceeded"}}', "/v1/completions")
    assert backend.info()["context_window"] == 2048 and backend.info()["context_window_source"] == "setting"


@pytest.mark.parametrize(("status", "body", "kind", "needle"), [
    (401, '{"detail": "Invalid API key"}', ServerAuthenticationError, "Fix: pass api_key"),
    (404, '{"error": {"message": "The model `hammer2` does not exist.", "type": "NotFoundError", "code": 404}}',
     ServerModelNotFoundError, "--served-model-name"),
    (404, '{"detail": "Not Found"}', ServerHTTPError, "base_url must be the server root or its /v1"),
    (422, '{"detail": [{"loc": ["body", "max_tokens"], "msg": "Input should be a valid integer", "type": "int"}]}',
     ServerHTTPError, "body.max_tokens: Input should be a valid integer"),
    (503, '{"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}',
     ServerUnavailableError, "Loading model"),
    (429, "slow down", ServerHTTPError, "rate limiting"),
    (500, "<html>Internal Server Error</html>", ServerHTTPError, "HTTP 500 on /v1/completions: <html>"),
])
def test_http_errors_are_named_with_the_servers_message(status: int, body: str, kind: type[Exception],
                                                        needle: str) -> None:
    error = BACKEND._fail(status, body, "/v1/completions")
    assert isinstance(error, kind) and needle in str(error)
    assert getattr(error, "status_code", status) in (status, None)


def test_backoff_doubles_honours_retry_after_and_is_capped() -> None:
    backend = OpenAICompatibleBackend("http://127.0.0.1:8000", retry_backoff=0.5, max_backoff=4)
    assert 0.5 <= backend._connection.backoff(0, None) <= 0.625 and 1.0 <= backend._connection.backoff(1, None) <= 1.25
    assert backend._connection.backoff(0, "3") == 3.0  # the server's Retry-After wins over a shorter backoff
    assert backend._connection.backoff(0, "120") == 4.0 and backend._connection.backoff(10, None) == 4.0


@pytest.mark.parametrize("launcher", ["llama-server", "llama-cpp-python"])
def test_the_api_key_goes_to_the_server_through_its_environment_never_its_command_line(launcher: str) -> None:
    from hammer_plugins.launch.launcher import LlamaCppPythonServer, LlamaServer

    server = (LlamaServer("model.gguf", api_key="sk-secret", binary="/opt/llama-server") if launcher == "llama-server"
              else LlamaCppPythonServer("model.gguf", api_key="sk-secret"))
    assert not any("sk-secret" in part for part in server.command())  # the process list shows the command line
    assert server.environment()[server.key_variable] == "sk-secret"
    assert server.key_variable == {"llama-server": "LLAMA_API_KEY", "llama-cpp-python": "API_KEY"}[launcher]


def test_hammer_serve_reads_the_key_from_the_environment_and_warns_beyond_loopback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from hammer_plugins.cli.serve import add_serve_parser
    from hammer_plugins.launch.child import exposure_warning

    monkeypatch.setenv("HAMMER_SERVER_API_KEY", "sk-from-env")
    parser = argparse.ArgumentParser(prog="hammer")
    add_serve_parser(parser.add_subparsers(dest="command"))
    assert parser.parse_args(["serve"]).api_key == "sk-from-env"
    assert parser.parse_args(["serve", "--api-key", "sk-flag"]).api_key == "sk-flag"
    help_text = parser._subparsers._group_actions[0].choices["serve"].format_help()  # type: ignore[union-attr]
    assert "process list" in " ".join(help_text.split())
    assert exposure_warning("0.0.0.0", None) is not None and "HAMMER_SERVER_API_KEY" in str(exposure_warning("0.0.0.0", None))
    assert exposure_warning("0.0.0.0", "sk") is None and exposure_warning("127.0.0.1", None) is None


def test_the_old_import_path_gives_the_same_classes() -> None:
    # Code written against hammer_plugins.backends.remote (before the backends were split by job) still runs.
    from hammer_plugins.backends import remote, server
    from hammer_plugins.launch import LlamaCppPythonServer, LlamaServer

    assert server.OpenAICompatibleBackend is remote.OpenAICompatibleBackend
    assert (server.LlamaServer, server.LlamaCppPythonServer) == (LlamaServer, LlamaCppPythonServer)
    assert set(remote.__all__) < set(server.__all__)


# ------------------------------------------------------------------------ no server at all
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once the socket closes


def test_a_closed_port_is_unavailable_after_bounded_retries() -> None:
    backend = OpenAICompatibleBackend(f"http://127.0.0.1:{closed_port()}/v1", model="hammer", max_retries=2,
                                      retry_backoff=0.1, trust_env=False)
    started = time.perf_counter()
    with pytest.raises(ServerUnavailableError, match=r"could not connect .* after 3 attempt\(s\)\. Fix: start the server"):
        HammerEngine(backend=backend).generate([Message.user("Say hi.")])
    assert backend.stats.requests == 3 and backend.stats.retries == 2
    assert 0.3 <= time.perf_counter() - started < 10  # backoff 0.1 s then 0.2 s (plus jitter), no more


async def test_a_closed_port_fails_the_same_way_in_async_calls() -> None:
    backend = OpenAICompatibleBackend(f"http://127.0.0.1:{closed_port()}/v1", model="hammer", max_retries=1,
                                      retry_backoff=0.01, trust_env=False)
    with pytest.raises(ServerUnavailableError, match="after 2 attempt"):
        await HammerEngine(backend=backend).agenerate([Message.user("Say hi.")])
