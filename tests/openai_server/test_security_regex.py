"""Issue 37, classes 1 and 7, on the OpenAI server with a scripted model (our own logic; the real model's
run of the same request is ``test_security_regex_real.py``).

* A call whose value makes ``(a+)+b`` backtrack exponentially (``"a" * 40 + "c ab"``) is checked after
  decoding in linear time: the request is answered while ``/health`` answers at once.
* A ``pattern`` the linear engine cannot run, and two tool names a person cannot tell apart, are a
  ``400 invalid_tool_schema`` naming the problem.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.http_api import BackgroundServer, create_app

CRAFTED = "a" * 40 + "c ab"


def store(pattern: str, name: str = "store") -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}, "required": ["s"]}}}


@pytest.fixture
def server() -> Iterator[BackgroundServer]:
    answers = [json.dumps([{"name": "store", "arguments": {"s": value}}]) for value in (CRAFTED, "a" * 100_000 + "c")]
    engine = HammerEngine(backend=ScriptedBackend(answers))
    with BackgroundServer(create_app(engine, model_name="hammer", time_limit=30)) as running:
        yield running


def post(server: BackgroundServer, tools: list[dict[str, Any]]) -> httpx.Response:
    payload = {"model": "hammer", "tools": tools, "messages": [{"role": "user", "content": f"Store {CRAFTED}"}]}
    return httpx.post(server.base_url + "/chat/completions", json=payload, timeout=60)


def test_a_value_that_backtracks_exponentially_is_checked_while_health_answers(server: BackgroundServer) -> None:
    replies: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: replies.extend(post(server, [store("(a+)+b")]) for _ in range(2)))
    thread.start()
    health = []
    while thread.is_alive():
        started = time.perf_counter()
        assert httpx.get(server.url + "/health", timeout=30).status_code == 200
        health.append(time.perf_counter() - started)
        time.sleep(0.02)
    thread.join()
    first, second = (r.json()["choices"][0]["message"] for r in replies)
    assert json.loads(first["tool_calls"][0]["function"]["arguments"]) == {"s": CRAFTED}  # it holds a match
    assert "tool_calls" not in second or not second["tool_calls"]  # 100,000 a's and no b: the check refuses it
    assert max(health) < 1.0


@pytest.mark.parametrize(("tools", "named"), [
    ([store("(a)\\1")], "a back-reference"), ([store("^(?=.*[0-9]).{8,}$")], "a lookaround"),
    ([store("x", "get_current_time"), store("x", "get_current_time\u200b")],
     "the names 'get_current_time' and 'get_current_time\\u200b' differ only by invisible or look-alike characters"),
])
def test_what_cannot_be_run_or_told_apart_is_a_400(server: BackgroundServer, tools: list[dict[str, Any]],
                                                   named: str) -> None:
    reply = post(server, tools)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert error["code"] == "invalid_tool_schema" and named in error["message"], error
