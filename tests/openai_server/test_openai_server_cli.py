"""`hammer serve --openai` as users start it: a separate process on the embedded default model, asked
with the openai SDK, stopped with Ctrl-C (SIGINT)."""

from __future__ import annotations

import json
import re

import pytest
from openai import OpenAI
from openai_server_helpers import hammer_serve

from hammer_plugins.tools.definition import to_tools
from hammer_plugins.tools.demo import DEMO_TOOLS


@pytest.mark.real_model
def test_hammer_serve_openai_answers_the_sdk_and_stops_on_ctrl_c(default_model_path: str) -> None:
    env = {"HAMMER_SERVER_API_KEY": "cli-key", "HAMMER_MODEL_PATH": default_model_path}
    argv = ["--openai", "--n-ctx", "4096", "--alias", "hammer-cli", "--max-tokens", "16"]
    with hammer_serve(argv, env, startup=120) as served:
        client = OpenAI(base_url=served.base_url, api_key="cli-key", max_retries=0, timeout=120)
        assert [m.id for m in client.models.list()] == ["hammer-cli"]
        reply = client.chat.completions.create(model="hammer-cli", tools=[t.to_openai() for t in to_tools(DEMO_TOOLS)],
                                               messages=[{"role": "user", "content": "What's the weather in Paris?"}],
                                               max_tokens=100)  # the request's own limit wins over --max-tokens
        call = reply.choices[0].message.tool_calls[0]
        assert call.function.name == "get_weather" and json.loads(call.function.arguments)["city"] == "Paris"
        story = client.chat.completions.create(model="hammer-cli", messages=[
            {"role": "user", "content": "Write a long story about a dragon."}])  # no limit of its own: --max-tokens
        assert story.choices[0].finish_reason == "length" and story.usage.completion_tokens == 16
    assert served.code == 0, served.output
    assert "as 'hammer-cli' at http://127.0.0.1:" in served.output and "without an API key" not in served.output
    assert "cli-key" not in served.output  # the key is never printed
    # The access log (info, the default): a line per request, with the real model's token counts.
    chat = [line for line in served.output.splitlines() if "POST /v1/chat/completions door=chat_completions" in line]
    assert len(chat) == 2 and all("status=200" in line and " prompt=" in line for line in chat), served.output
    assert "answer=tool_calls" in chat[0] and "completion=16" in chat[1] and "cut=max_tokens" in chat[1], chat


@pytest.mark.parametrize(("argv", "message"), [
    (["serve", "--backend", "llama-server"], "--backend and --base-url choose what runs the model behind --openai"),
    (["serve", "--openai", "--backend", "server"], "needs the server's URL. Fix: add --base-url"),
    (["serve", "--openai", "--base-url", "http://127.0.0.1:1/v1"], "--base-url goes with --backend server"),
    # The raw llama-server's options were ignored under --openai: --print-command started a server.
    (["serve", "--openai", "--print-command"], "hammer serve --openai: --print-command prints the raw llama-server's"),
    (["playground", "--print-command"], "hammer playground: --print-command prints the raw llama-server's"),
    (["serve", "--openai", "--", "--metrics"], "options after -- (--metrics) go to llama-server, and none runs here"),
    (["playground", "--backend", "server", "--", "-fa"], "Fix: add --backend llama-server to start one"),
])
def test_backend_options_that_do_not_fit_are_named_with_the_fix(argv: list[str], message: str) -> None:
    from hammer_plugins.cli.main import build_parser

    args = build_parser(argv).parse_args(argv)
    with pytest.raises(SystemExit, match=re.escape(message)):
        args.func(args)


def test_options_after_the_dashes_reach_the_llama_server_the_api_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """With --backend llama-server there is a llama-server: what follows -- goes to it (launched, not printed)."""
    from hammer_plugins.cli.main import build_parser
    from hammer_plugins.launch import launcher

    argv = ["serve", "--openai", "--backend", "llama-server", "--no-build", "--", "--metrics"]
    args = build_parser(argv).parse_args(argv)
    started: dict[str, object] = {}

    def record(self: launcher.LlamaServer, *a: object, **k: object) -> None:
        started["extra"] = self.extra_args
        raise SystemExit("stopped before starting")

    monkeypatch.setattr(launcher.LlamaServer, "start", record)
    monkeypatch.setattr("hammer_plugins.launch.llama_server_binary.find_or_build_llama_server", lambda build: "llama-server")
    monkeypatch.setattr("hammer_plugins.models.source.local_gguf", lambda source: "model.gguf")
    with pytest.raises(SystemExit, match="stopped before starting"):
        args.func(args)
    assert started["extra"] == ("--metrics",)
