"""The API doors of the server: each a folder that plugs in, each rule of a request written once (the engine's) and
named in each API's own fields. No model: the scripted backend, the real app, the real clients' bodies."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import httpx
import pytest

from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.http_api import BackgroundServer, create_app

ROOT = Path(__file__).resolve().parents[2]
SERVER = ROOT / "hammer_plugins" / "http_api"
KEY = "door-test-key"

WEATHER = {"name": "get_weather", "description": "Get the weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
BROKEN_SCHEMA = {"type": "object", "properties": {"x": {"type": "complex"}}}


def _door_folders() -> list[str]:
    return sorted(p.parent.name for p in SERVER.glob("*/router.py"))


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_nothing_shared_imports_a_door() -> None:
    """The modules every API shares know no API: only ``doors.py``, the one list, imports the doors."""
    doors = {f"hammer_plugins.http_api.{name}" for name in _door_folders()}
    assert len(doors) >= 5
    offenders = {path.name: sorted(m for m in _imports(path) if any(m == d or m.startswith(d + ".") for d in doors))
                 for path in sorted(SERVER.glob("*.py")) if path.name != "doors.py"}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_every_door_folder_is_registered_and_nothing_else() -> None:
    """A new API is a folder with a ``router.py`` and one line in ``doors.py``: the list names exactly the folders."""
    from hammer_plugins.http_api.doors import DOORS

    assert sorted(make.__module__.split(".")[-2] for make in DOORS) == _door_folders()


def test_the_checker_finds_a_shared_module_that_imports_a_door(tmp_path: Path) -> None:
    """The import reader sees what the test above looks for (a planted import is found)."""
    planted = tmp_path / "planted.py"
    planted.write_text("from hammer_plugins.http_api.ollama.writer import OllamaWriter\n", encoding="utf-8")
    assert "hammer_plugins.http_api.ollama.writer" in _imports(planted)


# ------------------------------------------------------------------ each rule, each door, its own field names
def _chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **more: Any) -> dict[str, Any]:
    return {"model": "hammer", "messages": messages, **({"tools": tools} if tools is not None else {}), **more}


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": tool}


BODIES: dict[str, dict[str, Any]] = {
    # rule -> door -> (path, body, the field the error must name)
    "tools": {
        "chat": ("/v1/chat/completions", _chat([{"role": "user", "content": "hi"}],
                                               [_function(WEATHER), _function({"name": "f", "parameters": BROKEN_SCHEMA})]),
                 "tools[1].function.parameters"),
        "responses": ("/v1/responses", {"model": "hammer", "input": "hi", "tools": [
            {"type": "web_search"}, {"type": "function", **WEATHER},
            {"type": "namespace", "name": "crm", "tools": [{"type": "function", "name": "f", "parameters": BROKEN_SCHEMA}]}]},
                      "tools[2].tools[0].parameters"),
        "messages": ("/v1/messages", {"model": "hammer", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}],
                                      "tools": [{"type": "bash_20250124", "name": "bash"},
                                                {"name": "get_weather", "input_schema": WEATHER["parameters"]},
                                                {"name": "f", "input_schema": BROKEN_SCHEMA}]},
                     "tools[2].input_schema"),
        "ollama": ("/api/chat", _chat([{"role": "user", "content": "hi"}],
                                      [_function({"name": "f", "parameters": BROKEN_SCHEMA})], stream=False),
                   "tools[0].function.parameters"),
    },
    "tool_choice": {
        "chat": ("/v1/chat/completions", _chat([{"role": "user", "content": "hi"}], [_function(WEATHER)],
                                               tool_choice={"type": "function", "function": {"name": "nope"}}),
                 "tool_choice"),
        "responses": ("/v1/responses", {"model": "hammer", "input": "hi", "tools": [{"type": "function", **WEATHER}],
                                        "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
        "messages": ("/v1/messages", {"model": "hammer", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}],
                                      "tools": [{"name": "get_weather", "input_schema": WEATHER["parameters"]}],
                                      "tool_choice": {"type": "tool", "name": "nope"}}, "tool_choice"),
        "ollama": ("/api/chat", _chat([{"role": "user", "content": "hi"}], [_function(WEATHER)], tool_choice="nope",
                                      stream=False), "tool_choice"),
    },
    "a result answers a call": {
        "chat": ("/v1/chat/completions", _chat([{"role": "user", "content": "hi"},
                                                {"role": "tool", "tool_call_id": "call_9", "content": "sunny"}]),
                 "messages[1].tool_call_id"),
        "responses": ("/v1/responses", {"model": "hammer", "instructions": "Be brief.", "input": [
            {"role": "user", "content": "hi"}, {"type": "reasoning", "summary": []},
            {"type": "function_call_output", "call_id": "call_9", "output": "sunny"}]}, "input[2].call_id"),
        "messages": ("/v1/messages", {"model": "hammer", "max_tokens": 8, "system": "Be brief.", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "user", "content": [{"type": "text", "text": "and"},
                                         {"type": "tool_result", "tool_use_id": "toolu_9", "content": "sunny"}]}]},
                     "messages[1].content[1].tool_use_id"),
        "ollama": ("/api/chat", _chat([{"role": "user", "content": "hi"},
                                       {"role": "tool", "tool_name": "get_weather", "content": "sunny"}],
                                      [_function(WEATHER)], stream=False), "messages[1].tool_name"),
    },
    "the served model": {
        "chat": ("/v1/chat/completions", {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, "model"),
        "responses": ("/v1/responses", {"model": "gpt-4o", "input": "hi"}, "model"),
        "messages": ("/v1/messages", {"model": "claude-x", "max_tokens": 8,
                                      "messages": [{"role": "user", "content": "hi"}]}, "model"),
        "ollama": ("/api/chat", {"model": "llama3", "messages": [{"role": "user", "content": "hi"}], "stream": False},
                   "model"),
    },
}
CASES = [(rule, door, *case) for rule, doors in BODIES.items() for door, case in doors.items()]


@pytest.fixture(scope="module")
def server() -> Any:
    engine = HammerEngine(backend=ScriptedBackend(["[]"] * 100))
    with BackgroundServer(create_app(engine, model_name="hammer", api_key=KEY)) as running:
        yield running


def _error(door: str, reply: httpx.Response) -> tuple[str, str | None]:
    """The error's message and the field it names, read from the API's own error shape."""
    body = reply.json()
    if door == "messages":
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}, body
        return body["error"]["message"], None  # Anthropic's shape names no field: the place is in the message
    if door == "ollama":
        assert set(body) == {"error"} and isinstance(body["error"], str), body
        return body["error"], None
    return body["error"]["message"], body["error"]["param"]


@pytest.mark.parametrize(("rule", "door", "path", "body", "field"), CASES, ids=[f"{r}-{d}" for r, d, *_ in CASES])
def test_each_rule_is_named_in_each_apis_own_fields(server: Any, rule: str, door: str, path: str, body: dict[str, Any],
                                                    field: str) -> None:
    """The rule is the engine's, once; the error is the door's: its status, its shape, its field's name (in the
    error's ``param`` where the API has one, else in its message, as Anthropic's and Ollama's errors carry it)."""
    reply = httpx.post(server.url + path, json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=30,
                       trust_env=False)
    assert reply.status_code == (404 if rule == "the served model" else 400), reply.text
    message, param = _error(door, reply)
    if door in ("chat", "responses"):
        assert param == field, (param, message)
    elif rule != "the served model":
        assert field in message, message


def _function_lengths() -> dict[str, int]:
    lengths = {}
    for path in sorted(SERVER.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lengths[f"{path.relative_to(SERVER)}:{node.name}"] = node.end_lineno - node.lineno + 1  # type: ignore[operator]
    return lengths


def test_the_app_is_a_list_of_registrations_and_no_function_of_the_server_is_long() -> None:
    """``create_app`` registers the doors and the shared guard, listener and worker (under 80 lines); no function of
    the server is over 60 lines (a 222-line closure held every route before)."""
    lengths = _function_lengths()
    assert lengths["app.py:create_app"] < 80
    assert {name: n for name, n in lengths.items() if n > 60} == {}


@pytest.mark.parametrize("door", ["chat", "responses", "messages"])
def test_a_clients_call_id_is_echoed_bounded(server: Any, door: str) -> None:
    """An id is the client's text: a lone result's error quotes at most the start of it, never 20,000 characters."""
    long_id = "x" * 20_000
    path, body, _ = BODIES["a result answers a call"][door]
    text = str(body).replace("call_9", long_id).replace("toolu_9", long_id)
    reply = httpx.post(server.url + path, json=ast.literal_eval(text), timeout=30, trust_env=False,
                       headers={"Authorization": f"Bearer {KEY}"})
    message, _ = _error(door, reply)
    assert reply.status_code == 400 and "xxxx" in message and len(message) < 1000, len(message)


# ------------------------------------------------------------------ the engine's tool selector, at every door
def test_every_door_offers_what_the_engines_own_selector_chose() -> None:
    """A caller's selector on the engine decides what every API's prompt offers (the default would offer the
    weather tool for this question; the selector offers two others)."""
    asked: list[str] = []

    def choose(question: str, tools: list[Any]) -> list[str]:
        asked.append(question)
        return ["tool_3", "tool_7"]

    tools = [{"name": f"tool_{i}", "description": f"Does thing number {i} with files and records. " + "x " * 60,
              "parameters": {"type": "object", "properties": {"value": {"type": "string"}}}} for i in range(40)]
    tools.append(WEATHER)
    backend = ScriptedBackend(['[{"name": "tool_3", "arguments": {"value": "a"}}]'] * 4)
    engine = HammerEngine(backend=backend, tool_budget=400, tool_selector=choose)
    question = "What's the weather in Paris?"
    bodies = {
        "/v1/chat/completions": _chat([{"role": "user", "content": question}], [_function(t) for t in tools]),
        "/v1/responses": {"model": "hammer", "input": question, "tools": [{"type": "function", **t} for t in tools]},
        "/v1/messages": {"model": "hammer", "max_tokens": 64, "messages": [{"role": "user", "content": question}],
                         "tools": [{"name": t["name"], "description": t.get("description", ""),
                                    "input_schema": t["parameters"]} for t in tools]},
        "/api/chat": {**_chat([{"role": "user", "content": question}], [_function(t) for t in tools]), "stream": False},
    }
    with BackgroundServer(create_app(engine, model_name="hammer", api_key=KEY)) as running:
        for path, body in bodies.items():
            reply = httpx.post(running.url + path, json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=30,
                               trust_env=False)
            assert reply.status_code == 200, (path, reply.text)
            prompt = backend.prompts[-1]
            assert '"name": "tool_3"' in prompt and '"name": "tool_7"' in prompt, path
            assert '"name": "get_weather"' not in prompt and '"name": "tool_0"' not in prompt, path
    assert asked == [question] * 4
