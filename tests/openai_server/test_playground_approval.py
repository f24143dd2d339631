"""Issue 60, item 1: the playground runs a tool only as the model called it, once, when the page approves it.

The attack it reproduces: ``hammer playground --mcp <a server with a tool that writes>``, no ``--api-key``, and a
bare ``POST /playground/api/run`` from another process, another local user or a page on another localhost port ran
the tool with any arguments. Here the tool is real: the probe MCP server's ``save_note`` appends to a file, so each
refusal is checked on disk too. The model is scripted (no weights): its one answer is a ``save_note`` call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from installed import require

from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.http_api import BackgroundServer, create_app
from hammer_plugins.http_api.playground.approvals import TOKEN_HEADER

require("mcp.types", "mcp")
PROBE = Path(__file__).resolve().parents[1] / "mcp" / "probe_server.py"
TOKEN = "the-page-token"
PAGE = {TOKEN_HEADER: TOKEN}
CALL = '[{"name": "save_note", "arguments": {"text": "buy milk"}}]'
NOTE_TOOL = {"type": "function", "function": {"name": "save_note", "description": "Save a note.", "parameters": {
    "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}


@pytest.fixture(scope="module")
def notes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("notes")
    folder.chmod(0o777)  # the other local user's attempt must be refused by the server, not by the file's mode
    return folder / "notes.txt"


@pytest.fixture(scope="module")
def server(notes: Path) -> Iterator[BackgroundServer]:
    """A playground with the real probe MCP server (``save_note`` writes ``notes``), no API key (the loopback
    default), a model that answers every question with one ``save_note`` call."""
    import contextlib

    from hammer_plugins.mcp.client import attach_mcp

    with contextlib.ExitStack() as stack:
        tools, runners = attach_mcp([f"{sys.executable} {PROBE} --test-pid {os.getpid()}"], stack=stack,
                                    env={"PROBE_NOTES_FILE": str(notes)}, timeout=30)
        assert "save_note" in runners
        app = create_app(HammerEngine(backend=ScriptedBackend([CALL] * 40)), model_name="hammer",
                         playground_tools=[t.to_openai() for t in tools], playground_runners=runners,
                         playground_token=TOKEN)
        with BackgroundServer(app) as running:
            yield running


@pytest.fixture(autouse=True)
def no_notes(notes: Path) -> Iterator[None]:
    notes.unlink(missing_ok=True)
    yield
    notes.unlink(missing_ok=True)


def chat(server: BackgroundServer, *, stream: bool = True, headers: dict[str, str] | None = None) -> list[Any]:
    """The page's chat: a question, and the approvals of the calls it produced."""
    body = {"model": "hammer", "messages": [{"role": "user", "content": "Note: buy milk"}], "tools": [NOTE_TOOL],
            "stream": stream}
    reply = httpx.post(server.url + "/playground/api/chat", json=body, headers=headers or PAGE, timeout=30)
    assert reply.status_code == 200, reply.text
    if not stream:
        assert reply.json()["choices"][0]["message"]["tool_calls"][0]["id"] == reply.json()["hammer_approvals"][0]["call_id"]
        return list(reply.json()["hammer_approvals"])
    chunks = [json.loads(line[6:]) for line in reply.text.splitlines()
              if line.startswith("data: {")]
    streamed = [part["id"] for c in chunks for choice in c.get("choices", [])
                for part in choice["delta"].get("tool_calls") or [] if part.get("id")]
    offers = [offer for c in chunks for offer in c.get("hammer_approvals", [])]
    assert [o["call_id"] for o in offers] == streamed  # the ids the page's cards show
    return offers


def run(server: BackgroundServer, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(server.url + "/playground/api/run", json=body, headers=PAGE if headers is None else headers,
                      timeout=30)


def test_an_approved_call_runs_once_with_the_models_arguments(server: BackgroundServer, notes: Path) -> None:
    [offer] = chat(server)
    assert (offer["name"], offer["arguments"]) == ("save_note", {"text": "buy milk"})
    body = {"call_id": offer["call_id"], "approval": offer["approval"], "name": "save_note",
            "arguments": {"text": "buy milk"}}
    ran = run(server, body)
    assert ran.status_code == 200, ran.text
    assert notes.read_text().splitlines() == ["buy milk"]
    again = run(server, body)  # the same call, a second time
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_run"
    assert notes.read_text().splitlines() == ["buy milk"]


def test_a_whole_answer_carries_the_approvals_too(server: BackgroundServer, notes: Path) -> None:
    [offer] = chat(server, stream=False)
    assert run(server, {"call_id": offer["call_id"], "approval": offer["approval"]}).status_code == 200
    assert notes.read_text() == "buy milk\n"


def test_the_old_bare_run_is_refused_without_the_token_and_with_it(server: BackgroundServer, notes: Path) -> None:
    """The red team's request, as it was: a name and any arguments, no token; then with the token."""
    bare = {"name": "save_note", "arguments": {"text": "pwned"}}
    refused = run(server, bare, headers={})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "playground_token_required"
    with_token = run(server, bare)
    assert with_token.status_code == 400 and "call_id" in with_token.json()["error"]["message"]
    assert not notes.exists()


def test_a_call_the_model_never_made_other_arguments_or_approval_are_refused(server: BackgroundServer,
                                                                             notes: Path) -> None:
    [offer] = chat(server)
    never = run(server, {"call_id": "call_0123456789abcdef01234567", "approval": offer["approval"]})
    assert never.status_code == 404 and never.json()["error"]["code"] == "unknown_call"
    other = run(server, {"call_id": offer["call_id"], "approval": offer["approval"], "arguments": {"text": "pwned"}})
    assert other.status_code == 403 and other.json()["error"]["param"] == "arguments"
    renamed = run(server, {"call_id": offer["call_id"], "approval": offer["approval"], "name": "echo"})
    assert renamed.status_code == 403 and renamed.json()["error"]["param"] == "name"
    guessed = run(server, {"call_id": offer["call_id"], "approval": "x" * 32})
    assert guessed.status_code == 403 and guessed.json()["error"]["code"] == "approval_mismatch"
    assert not notes.exists()
    declined = httpx.post(server.url + "/playground/api/decline", headers=PAGE,
                          json={"call_id": offer["call_id"], "approval": offer["approval"]})
    assert declined.json() == {"forgotten": True}
    after = run(server, {"call_id": offer["call_id"], "approval": offer["approval"]})
    assert after.status_code == 404 and not notes.exists()  # a declined call can no longer run


# Standard library only: the other user runs the system's Python, which needs nothing of this venv.
ATTACK = """
import sys, urllib.request, urllib.error
url, token = sys.argv[1], sys.argv[2]
def status(request):
    try:
        return urllib.request.urlopen(request, timeout=30).status
    except urllib.error.HTTPError as error:
        return error.code
page = urllib.request.urlopen(url + "/", timeout=30).read().decode()
body = b'{"name": "save_note", "arguments": {"text": "pwned"}}'
print(status(urllib.request.Request(url + "/playground/api/run", data=body,
                                    headers={"content-type": "application/json"})))
print(status(urllib.request.Request(url + "/playground/api/config")))
print(token in page)
"""
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.mark.parametrize("user", ["same", "other"])
def test_a_bare_post_from_another_process_or_user_is_refused(server: BackgroundServer, notes: Path,
                                                             user: str) -> None:
    """Another process (and, run as root, uid 65534) with only the address: the page it can fetch holds no
    token, so its run and its config are refused, and nothing is written."""
    if user == "other" and (os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK)):
        pytest.skip("running as another user needs root and a system Python")

    def nobody() -> None:
        os.setgid(65534)
        os.setuid(65534)

    python = SYSTEM_PYTHON if user == "other" else sys.executable
    result = subprocess.run([python, "-I", "-c", ATTACK, server.url, TOKEN], capture_output=True, text=True,
                            timeout=60, preexec_fn=nobody if user == "other" else None, cwd="/")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["403", "403", "False"]
    assert not notes.exists()


def test_a_page_on_another_localhost_port_gets_no_cors_grant(server: BackgroundServer, notes: Path) -> None:
    """A page on http://localhost:5173: its preflight and its request are refused, with no CORS header to let it
    read an answer, even holding the token (it cannot: another origin's storage); the page's own origin works."""
    other = {"origin": "http://localhost:5173"}
    preflight = httpx.options(server.url + "/playground/api/run", headers={
        **other, "access-control-request-method": "POST", "access-control-request-headers": TOKEN_HEADER})
    assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers
    for path in ("/playground/api/run", "/playground/api/chat"):
        refused = httpx.post(server.url + path, headers={**PAGE, **other},
                             json={"name": "save_note", "arguments": {"text": "pwned"}})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "origin_not_allowed"
        assert "access-control-allow-origin" not in refused.headers
    config = httpx.get(server.url + "/playground/api/config", headers={**PAGE, **other})
    assert config.status_code == 403 and "access-control-allow-origin" not in config.headers
    assert not notes.exists()
    own = {"origin": server.url}
    [offer] = chat(server, headers={**PAGE, **own})
    ran = run(server, {"call_id": offer["call_id"], "approval": offer["approval"]}, headers={**PAGE, **own})
    assert ran.status_code == 200 and notes.read_text() == "buy milk\n"
    # The API itself keeps Ollama's rule: any local page may use it (it runs no tool).
    assert httpx.get(server.url + "/v1/models", headers=other).headers["access-control-allow-origin"] == other["origin"]


def test_each_start_has_its_own_token_and_no_repr_shows_it() -> None:
    from hammer_plugins.http_api.context import ServerSettings

    first, second = ServerSettings(), ServerSettings()
    assert first.playground_token != second.playground_token and len(first.playground_token) >= 40
    assert first.playground_token not in repr(first)


def test_every_helper_route_needs_the_token(server: BackgroundServer) -> None:
    """Each /playground/api/ route the app has (a new one too) answers 403 without the token, before its body."""
    from hammer_plugins.http_api.playground.router import API_PATH

    app = create_app(HammerEngine(backend=ScriptedBackend([])), playground_token=TOKEN)
    routes = [(route.path, sorted(route.methods)[0]) for route in app.routes  # type: ignore[attr-defined]
              if route.path.startswith(API_PATH)]  # type: ignore[attr-defined]
    assert len(routes) >= 7
    for path, method in routes:
        reply = httpx.request(method, server.url + path, json={})
        assert reply.status_code == 403 and reply.json()["error"]["code"] == "playground_token_required", path
