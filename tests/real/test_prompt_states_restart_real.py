"""A restarted server starts warm: a prompt prefix that served a request from memory goes to the disk prefix cache,
and the next ``hammer serve`` process on the same cache folder restores the longest stored prefix of its first
request instead of evaluating it, and answers as the cold run did (greedy). Two real server processes in sequence
on the real default model."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_process import hammer_serve

from hammer_plugins.tools.definition import to_tools
from hammer_plugins.tools.demo import DEMO_TOOLS

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(600)]

KEY = "restart-key"
# Two sessions' instructions of about 300 tokens each, unlike from their first word: each is a line of its own on
# disk, and the restarted server must pick the one its prompt begins with.
SYSTEMS = {name: " ".join(f"{name} rule {i}: keep answers {word}, cite the {name} handbook, and call a tool when one "
                          f"fits the question." for i, word in
                          enumerate(["short", "exact", "polite", "plain", "checked", "dated", "signed", "calm",
                                     "clear", "kind", "brief", "honest"]))
           for name in ("Alpha", "Bravo")}


def _ask(url: str, system: str) -> dict[str, Any]:
    body = {"model": "hammer", "max_tokens": 48, "temperature": 0,
            "tools": [t.to_openai() for t in to_tools(DEMO_TOOLS)],
            "messages": [{"role": "system", "content": system},
                         {"role": "user", "content": "What's the weather in Paris?"}]}
    reply = httpx.post(url + "/chat/completions", json=body, headers={"authorization": f"Bearer {KEY}"}, timeout=300)
    assert reply.status_code == 200, reply.text
    return reply.json()


def _answer(reply: dict[str, Any]) -> tuple[Any, list[Any]]:
    """The message's text and calls, less the calls' ids (new for every reply)."""
    message = reply["choices"][0]["message"]
    return message.get("content"), [call["function"] for call in message.get("tool_calls") or []]


def _cached(reply: dict[str, Any]) -> int:
    return reply["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_a_restarted_server_restores_the_longest_stored_prefix_and_answers_as_a_cold_run(
        default_model_path: str, tmp_path: Path) -> None:
    folder = tmp_path / "prefix-kv"
    env = {"HAMMER_PREFIX_CACHE_DIR": str(folder), "HAMMER_MODEL_PATH": default_model_path}
    argv = ["--openai", "--n-ctx", "4096", "--api-key", KEY]
    with hammer_serve(argv, env, startup=180) as first:
        cold = _ask(first.base_url, SYSTEMS["Alpha"])  # an empty cache folder: the whole prompt is evaluated
        again = _ask(first.base_url, SYSTEMS["Alpha"])  # served by the context: a prefix that paid off
        _ask(first.base_url, SYSTEMS["Bravo"])
        _ask(first.base_url, SYSTEMS["Bravo"])
    assert first.code == 0, first.output
    assert _cached(cold) == 0 and _cached(again) >= again["usage"]["prompt_tokens"] - 2
    stored = sorted((folder / "prompts").glob("*.kv"))
    assert len(stored) == 2, stored  # one line each; owner-only like the rest of the cache
    assert stat.S_IMODE(os.stat(folder / "prompts").st_mode) == 0o700
    assert all(stat.S_IMODE(os.stat(p).st_mode) == 0o600 for p in stored)

    with hammer_serve(argv, env, startup=180) as second:
        warm = _ask(second.base_url, SYSTEMS["Alpha"])  # its first request: the context and memory are empty
        health = httpx.get(f"http://127.0.0.1:{second.port}/health").json()
    assert second.code == 0, second.output
    # Alpha's line, not Bravo's (which shares only the tools block and would leave Alpha's ~300 tokens to evaluate).
    assert _cached(warm) >= warm["usage"]["prompt_tokens"] - 2, warm["usage"]
    assert health["prompt_cache"]["token_hit_rate"] > 0.9, health
    assert _answer(warm) == _answer(cold) and _answer(warm)[1]  # greedy: the restored state changes nothing


def test_a_damaged_stored_prompt_is_a_miss_and_removed(default_model_path: str, tmp_path: Path) -> None:
    """Within one process, without the memory cache: a stored prompt with a flipped byte is evaluated again."""
    from hammer_plugins import HammerEngine, Message

    engine = HammerEngine(model_path=default_model_path, n_ctx=4096, prefix_cache=tmp_path, cache_ram=0,
                          max_tokens=48)
    messages = [Message.system(SYSTEMS["Alpha"]), Message.user("What's the weather in Paris?")]
    engine.generate(messages, tools=DEMO_TOOLS)
    engine.generate(messages, tools=DEMO_TOOLS)  # served by the context: stored
    backend = engine.backend
    prefix = backend.prefix
    assert prefix.writing is not None
    prefix.writing.result()
    context = backend.llama.input_ids[:backend.llama.n_tokens].tolist()
    (entry,) = (tmp_path / "prompts").glob("*.kv")
    backend.llama.reset()  # as a new process: nothing in the context
    cached, from_disk = prefix.restore_stored(context, 0)
    assert cached == from_disk > 300  # the whole prompt but its last token
    blob = bytearray(entry.read_bytes())
    blob[-100] ^= 0xFF
    entry.write_bytes(bytes(blob))
    backend.llama.reset()
    assert prefix.restore_stored(context, 0) == (0, 0)
    assert not entry.exists()
