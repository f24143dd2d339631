"""Issue 60, item 7: integers that would wrap in C are a 400 naming the field, on every door.

Before, ``seed`` 2**64 + 5 sampled as seed 5 and ``top_k`` 2**32 as 0 (off), each answered 200. Each door's
own field names: ``seed`` (Chat Completions, Responses, Messages), ``options.seed`` (Ollama). No model: the
scripted backend behind the real app.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from hammer_plugins import HammerEngine, Message, ScriptedBackend
from hammer_plugins.engine.request import COUNT_MAX, SEED_MAX, TOP_K_MAX, EngineRequest
from hammer_plugins.http_api import BackgroundServer, create_app

KEY = "numbers-key"
HI = [{"role": "user", "content": "hi"}]


def _body(door: str, field: str, value: int) -> tuple[str, dict[str, Any], str]:
    """(path, body, the name the error must carry) for ``field`` set to ``value`` on ``door``."""
    if door == "chat":
        return "/v1/chat/completions", {"model": "hammer", "messages": HI, field: value}, field
    if door == "responses":
        name = "max_output_tokens" if field == "max_tokens" else field
        return "/v1/responses", {"model": "hammer", "input": "hi", name: value}, name
    if door == "messages":
        body = {"model": "hammer", "max_tokens": 8, "messages": HI, field: value}
        return "/v1/messages", body, field
    name = "num_predict" if field == "max_tokens" else field
    return "/api/chat", {"model": "hammer", "messages": HI, "stream": False, "options": {name: value}}, f"options.{name}"


@pytest.fixture(scope="module")
def server() -> Any:
    engine = HammerEngine(backend=ScriptedBackend(["Hello."] * 200))
    with BackgroundServer(create_app(engine, model_name="hammer", api_key=KEY)) as running:
        yield running


def _post(server: Any, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.url + path, json=body, headers={"Authorization": f"Bearer {KEY}"}, timeout=30,
                      trust_env=False)


def _named(door: str, reply: httpx.Response, name: str) -> bool:
    body = reply.json()
    if door in ("chat", "responses"):
        return body["error"]["param"] == name
    text = body["error"]["message"] if door == "messages" else body["error"]
    return name in text


DOORS = ["chat", "responses", "messages", "ollama"]
OUT_OF_RANGE = [("seed", 2**64 + 5), ("seed", 2**32 + 2**64), ("seed", -1), ("top_k", 2**32),
                ("top_k", TOP_K_MAX + 1), ("max_tokens", 2**31), ("max_tokens", 2**64 + 8)]


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize(("field", "value"), OUT_OF_RANGE, ids=[f"{f}={v}" for f, v in OUT_OF_RANGE])
def test_an_integer_that_would_wrap_is_a_400_naming_the_field(server: Any, door: str, field: str, value: int) -> None:
    path, body, name = _body(door, field, value)
    reply = _post(server, path, body)
    assert reply.status_code == 400, (door, field, value, reply.status_code, reply.text[:300])
    assert _named(door, reply, name), reply.text[:300]


@pytest.mark.parametrize("door", DOORS)
def test_the_largest_values_in_range_are_served(server: Any, door: str) -> None:
    for field, value in (("seed", SEED_MAX), ("seed", 0), ("top_k", TOP_K_MAX)):
        path, body, _ = _body(door, field, value)
        reply = _post(server, path, body)
        assert reply.status_code == 200, (door, field, reply.text[:300])


def test_the_engine_request_holds_the_same_bounds() -> None:
    """ChatHammer, HammerLLM and the hammer command build an EngineRequest: the same bounds, as a ValueError."""
    for field, value in (("seed", SEED_MAX + 1), ("top_k", TOP_K_MAX + 1), ("max_tokens", COUNT_MAX + 1),
                         ("repeat_last_n", COUNT_MAX + 1)):
        with pytest.raises(ValueError, match=field):
            EngineRequest.of([Message.user("hi")], **{field: value})
    assert EngineRequest.of([Message.user("hi")], seed=SEED_MAX).seed == SEED_MAX


@pytest.mark.parametrize(("kind", "sent"), [("llama_server", "hashed"), ("llama_cpp_python", "hashed"),
                                            ("vllm", "as is"), ("openai", "as is")])
def test_a_seed_beyond_the_backends_range_is_hashed_into_it(kind: str, sent: str) -> None:
    """llama.cpp keeps a seed's low 32 bits (2**32 + 5 sampled as 5): a llama.cpp server is sent a hash of it
    instead, vLLM (signed 64 bits) a hash of a seed from 2**63; a server of unknown range gets the seed as it is."""
    from hammer_plugins.backends.base import GenerationSettings
    from hammer_plugins.backends.remote import OpenAICompatibleBackend
    from hammer_plugins.backends.seeds import LLAMA_CPP_SEEDS, VLLM_SEEDS

    backend = OpenAICompatibleBackend("http://127.0.0.1:9", model="m", server_kind=kind, token_counting="estimate")

    def seed_sent(seed: int) -> int:
        return backend._completion_body("p", GenerationSettings(seed=seed), {})["seed"]

    assert seed_sent(5) == 5
    if sent == "as is":
        assert seed_sent(2**32 + 5) == 2**32 + 5
    else:
        assert seed_sent(2**32 + 5) not in (5, 2**32 + 5) and seed_sent(2**32 + 5) < LLAMA_CPP_SEEDS
        assert seed_sent(2**32 - 1) < LLAMA_CPP_SEEDS  # never llama.cpp's "random seed"
    if kind == "vllm":
        assert seed_sent(2**64 - 1) < VLLM_SEEDS and seed_sent(2**63 - 1) == 2**63 - 1
