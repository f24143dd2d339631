"""Codex CLI (Responses API) and Claude Code (Messages API), installed from npm by scripts/test.sh, each
pointed at the server on the embedded default model as their docs say to point them at a gateway, and
each completing one turn without a protocol error.

The server runs with a 32k context. Codex sends an agent-sized prompt (its instructions and tools, thousands of
tokens even once tool selection has offered only what matches the question); in process, its first contact evaluates
that prompt and the instructions' system turn (kept for the answer pass), most of this module's time on one CPU.
Claude Code runs as a script runs it, ``claude -p --bare``: its docs give bare mode for scripted and CI calls (no
hooks, skills, plugins, auto-memory or CLAUDE.md discovery, so every machine sends the same prompt), and its prompt
is then a fraction of the default mode's. The default mode's prompt (its system text, skills list and 12 tools) took
130 s of one CPU here against 17 s in bare mode, and proved nothing Codex's prompt does not: large prompts reach the
Messages API in tests/real/test_many_tools_real.py (230 tools through every door). What a 0.5B stand-in does with
either prompt is not the point (it may call one of their tools, or answer); that the conversation goes through both
clients' own parsers to a finished turn is. In process, greedy decoding is deterministic: Claude Code's session must
end in success, not in error_max_turns.

Tool selection (only the tools that match the question are offered) and the prefix cache (the instructions' KV
state kept from first contact) are what make an agent-sized prompt work in process: before them, Claude Code's
default-mode turn ran past the 900 s limit, since the one KV sequence evaluated its instructions and tools again
after each answer pass (docs/benchmarks/agent-prompts/llama_cpp_rounds1_selection.json).

On llama-server, with some working folders, the stand-in once answered Codex's prompt with a call list repeating
get_goal, create_goal, update_goal until max_tokens, which Codex reported as a failed turn ("Incomplete response
returned, reason: max_output_tokens"): llama-server decodes the grammar itself, and the loop guard ran only inside
the local runtimes. The server backend now runs its call-list part on the streamed answer
(hammer_plugins/backends/remote/loop_cut.py; tests/server/test_server_sansio.py).
"""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import hammer_plugins.http_api.respond as respond_module
from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.http_api import BackgroundServer, create_app
from hammer_plugins.support.cache_location import cache_dir

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(1500)]  # Codex's agent-sized prompt on one CPU

KEY = "agent-clis-key"
AGENT_CONTEXT = 32768


def npm_binary(name: str) -> str:
    """A client installed by scripts/test.sh (``npm install --prefix <cache>/npm``); fails, never skips."""
    path = cache_dir() / "npm" / "node_modules" / ".bin" / name
    assert path.exists(), f"{path} is missing: scripts/test.sh installs it (npm install --prefix {path.parents[2]})"
    return str(path)


@pytest.fixture(scope="module")
def in_process(default_model_path: str) -> Iterator[BackgroundServer]:
    """The API on the in-process backend (see the module's docstring), with the default settings otherwise."""
    engine = HammerEngine(model_path=default_model_path, n_ctx=AGENT_CONTEXT)
    with BackgroundServer(create_app(engine, model_name="hammer", api_key=KEY)) as running:
        yield running


def client_env(home: Path, **extra: str) -> dict[str, str]:
    """No more environment than the client needs: PATH, a throwaway HOME, its settings."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8", **extra}


def test_codex_exec_completes_a_turn(in_process: BackgroundServer, tmp_path: Path) -> None:
    """Codex's own tools and client, the default model's answer. Its instructions are a short file of ours
    (``model_instructions_file``, Codex's setting): its default ones are thousands of tokens, evaluated twice at
    first contact (the calls pass and the answer pass), 300 s of this suite's one CPU, and prove nothing here that
    the short ones do not; the default request (every instruction and tool) meets the server in
    test_codex_waits_through_a_long_prompt_evaluation, and its first contact on the model is a benchmark
    (docs/benchmarks/agent-prompts/agent_cli_codex.json)."""
    server = in_process
    (tmp_path / "codex").mkdir()  # Codex refuses a CODEX_HOME that does not exist
    instructions = tmp_path / "instructions.md"
    instructions.write_text("You are Codex, a coding agent in a terminal. Answer briefly; use a tool only when the "
                            "task needs one.\n", encoding="utf-8")
    provider = (f'model_providers.hammer={{name="hammer", base_url="{server.base_url}", wire_api="responses", '
                'env_key="HAMMER_KEY"}')
    done = subprocess.run(
        [npm_binary("codex"), "exec", "--skip-git-repo-check", "--json", "-c", provider, "-c", "model_provider=hammer",
         "-c", f'model_instructions_file="{instructions}"', "-m", "hammer", "Say hello in one short sentence."],
        cwd=tmp_path, env=client_env(tmp_path, CODEX_HOME=str(tmp_path / "codex"), HAMMER_KEY=KEY),
        capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    kinds = [e.get("type") for e in events]
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    assert "turn.completed" in kinds and "turn.failed" not in kinds and "error" not in kinds, [
        e for e in events if e.get("type") in ("error", "turn.failed")] or kinds
    messages = [e["item"].get("text", "") for e in events
                if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"]
    assert messages and messages[-1].strip(), events
    print(f"\ncodex: {len(events)} events, last agent message {messages[-1]!r}")


def test_codex_waits_through_a_long_prompt_evaluation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Codex gives up on a stream after ``stream_idle_timeout_ms`` (300 s by default) without an event, and SSE
    comment pings are not events to it: in CI, a first prompt that took longer on 2 shared cores came back as
    "Reconnecting... 1/5 (stream disconnected before completion: idle timeout waiting for SSE)". The Responses door
    repeats ``response.in_progress`` while a stream is quiet. Time scaled down here: a scripted model quiet for 4 s,
    Codex's idle timeout 2 s, a heartbeat every 0.5 s, no retry."""
    monkeypatch.setattr(respond_module, "PING_SECONDS", 0.5)

    def slow(prompt: str) -> str:
        time.sleep(4.0)
        return "Hello there."

    (tmp_path / "codex").mkdir()
    engine = HammerEngine(backend=ScriptedBackend(responder=slow), on_missing="call")
    with BackgroundServer(create_app(engine, model_name="hammer", api_key=KEY)) as server:
        provider = (f'model_providers.hammer={{name="hammer", base_url="{server.base_url}", wire_api="responses", '
                    'env_key="HAMMER_KEY", stream_idle_timeout_ms=2000, stream_max_retries=0}')
        done = subprocess.run(
            [npm_binary("codex"), "exec", "--skip-git-repo-check", "--json", "-c", provider, "-c",
             "model_provider=hammer", "-m", "hammer", "Say hello in one short sentence."],
            cwd=tmp_path, env=client_env(tmp_path, CODEX_HOME=str(tmp_path / "codex"), HAMMER_KEY=KEY),
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    errors = [e for e in events if e.get("type") in ("error", "turn.failed")]
    assert done.returncode == 0 and not errors, (errors, done.stderr[-3000:])
    assert [e["item"]["text"] for e in events if e.get("type") == "item.completed"
            and e["item"].get("type") == "agent_message"] == ["Hello there."], events


def claude_env(home: Path, server: BackgroundServer) -> dict[str, str]:
    """Claude Code pointed at ``server``: every model it asks for is the served name, no traffic besides."""
    return client_env(home, ANTHROPIC_BASE_URL=server.base_url.removesuffix("/v1"), ANTHROPIC_API_KEY=KEY,
                      ANTHROPIC_MODEL="hammer", ANTHROPIC_SMALL_FAST_MODEL="hammer",
                      ANTHROPIC_DEFAULT_HAIKU_MODEL="hammer", DISABLE_TELEMETRY="1",
                      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")


def test_claude_code_print_completes_a_turn(in_process: BackgroundServer, tmp_path: Path) -> None:
    server = in_process
    done = subprocess.run(
        [npm_binary("claude"), "-p", "--bare", "Say hello in one short sentence.", "--output-format", "json",
         "--max-turns", "3"],
        cwd=tmp_path, env=claude_env(tmp_path, server),
        capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    result = json.loads(done.stdout)  # the client's own account of the session: not JSON is a failure too
    assert result["type"] == "result", result
    assert done.returncode == 0 and result["subtype"] == "success" and result["is_error"] is False, (
        done.stdout[-3000:], done.stderr[-3000:])
    assert result["result"].strip(), result
    print(f"\nclaude: {result['num_turns']} turns, result {result['result']!r}")


def _tool_search_then_answer(prompt: str) -> str:
    """A scripted model for Claude Code's default mode: it calls ToolSearch, then answers once a result says a tool
    was loaded (the tools pass says done with [], the answer pass writes the answer)."""
    if "Tool loaded: " in prompt:
        return "[]" if "[BEGIN OF AVAILABLE TOOLS]" in prompt else "2 + 2 is 4."
    if '"name": "ToolSearch"' in prompt:
        return '[{"name": "ToolSearch", "arguments": {"query": "select:Read", "max_results": 5}}]'
    return "ToolSearch was not offered."


def test_claude_codes_tool_search_results_are_read_in_its_default_mode(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """Claude Code's default mode, with a scripted model that calls its ToolSearch tool: Claude Code answers the call
    with ``tool_reference`` blocks, which the server must read (it refused them with a 400: Claude Code retried
    three times, then dropped tool search and resent 21 tools, a prompt no cache held). The session ends in two
    requests, none refused, with the answer."""
    engine = HammerEngine(backend=ScriptedBackend(responder=_tool_search_then_answer))
    caplog.set_level(logging.INFO, logger="hammer_plugins.http_api.access_log")
    with BackgroundServer(create_app(engine, model_name="hammer", api_key=KEY)) as server:
        done = subprocess.run(
            [npm_binary("claude"), "-p", "What is 2 + 2?", "--output-format", "json", "--max-turns", "3"],
            cwd=tmp_path, env=claude_env(tmp_path, server),
            capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    statuses = [int(m.group(1)) for r in caplog.records if (m := re.search(r"POST /v1/messages\S* .*status=(\d+)",
                                                                             r.getMessage()))]
    result = json.loads(done.stdout)
    assert done.returncode == 0 and result["subtype"] == "success" and result["result"] == "2 + 2 is 4.", (
        done.stdout[-3000:], done.stderr[-3000:])
    assert statuses == [200, 200], statuses
