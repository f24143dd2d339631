"""Real inference with the transformers backend on the embedded default model.

transformers reads the GGUF directly (dequantizing to float32); the backend keeps the converted
checkpoint in the cache, so only the first run pays for it. CPU float32 decoding is slow
(roughly a token a second on 2 busy cores), so these tests use few, short answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hammer_plugins import HammerEngine, Message, ModelNotFoundError
from hammer_plugins.backends.transformers import TransformersBackend
from hammer_plugins.tools.demo import get_weather, send_email

# Longer than the suite's 300 s: the GGUF is dequantized on first use, and a process loads it again.
pytestmark = [pytest.mark.transformers_model, pytest.mark.timeout(900)]
TOOLS: list[Any] = [get_weather, send_email]


@pytest.fixture(scope="module")
def hf_engine(default_model_path: str) -> HammerEngine:
    engine = HammerEngine(model_path=default_model_path, backend="transformers", max_tokens=48)
    engine.load()
    return engine


def test_question_that_needs_a_tool(hf_engine: HammerEngine) -> None:
    out = hf_engine.generate([Message.user("What's the weather in Paris?")], tools=TOOLS)
    assert out.kind == "tool_calls", out.raw
    assert out.tool_calls[0].name == "get_weather" and out.tool_calls[0].arguments["city"] == "Paris"
    assert out.usage.prompt_tokens > 200 and out.usage.completion_tokens > 5
    assert out.finish_reason == "tool_calls"


def test_forced_tool_with_masking_comes_back_with_real_names(hf_engine: HammerEngine) -> None:
    out = hf_engine.generate([Message.user("Tell me a joke")], tools=TOOLS, tool_choice="send_email",
                             mask_names=True, max_tokens=120)
    assert out.kind == "tool_calls", out.raw
    assert out.tool_calls[0].name == "send_email"
    assert {"to", "subject", "body"} <= set(out.tool_calls[0].arguments)


def test_unrelated_question_under_auto(hf_engine: HammerEngine) -> None:
    out = hf_engine.generate([Message.user("Write a poem about the sea")], tools=TOOLS)
    assert out.kind in ("refusal", "text"), out.raw
    assert not out.tool_calls


def test_stream_yields_text_and_the_call(hf_engine: HammerEngine) -> None:
    events = list(hf_engine.stream([Message.user("Email bob@x.com saying hi")], tools=TOOLS, tool_choice="required"))
    final = events[-1]
    assert final.kind == "tool_calls" and final.tool_calls[0].arguments["to"] == "bob@x.com"
    assert "".join(getattr(e, "text", "") for e in events[:-1] if type(e).__name__ == "TextDelta") == final.raw


def test_hub_id_loads_offline_from_the_local_hub_cache(hf_engine: HammerEngine, tmp_path: Path) -> None:
    """A hub id goes through huggingface_hub's cache; with HF_HUB_OFFLINE=1 nothing is fetched."""
    checkpoint = Path(hf_engine.backend.checkpoint)  # type: ignore[attr-defined]
    revision = "0" * 40
    repo = tmp_path / "hub" / "models--hammer-test--qwen-stand-in"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    for file in checkpoint.iterdir():
        if not file.name.startswith("."):
            (snapshot / file.name).symlink_to(file)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    script = (
        "import json\n"
        "from hammer_plugins import HammerEngine, Message\n"
        "from hammer_plugins.tools.demo import send_email\n"
        "e = HammerEngine(model='hammer-test/qwen-stand-in', backend='transformers', max_tokens=40)\n"
        "out = e.generate([Message.user('Email bob@x.com saying hi')], tools=[send_email], tool_choice='send_email')\n"
        "print(json.dumps({'kind': out.kind, 'name': out.tool_calls[0].name, 'model': out.model}))\n"
    )
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    facts = json.loads(result.stdout.strip().splitlines()[-1])
    assert facts == {"kind": "tool_calls", "name": "send_email", "model": "hammer-test/qwen-stand-in"}


def test_unknown_hub_id_offline_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    backend = TransformersBackend(model="nobody/no-such-model")
    with pytest.raises(ModelNotFoundError, match="nobody/no-such-model"):
        backend.load()


def test_kv_cache_is_cropped_to_the_shared_prefix(hf_engine: HammerEngine) -> None:
    # Two answers cut after two tokens: only the prompts matter here.
    hf_engine.generate([Message.user("Say hi")], tools=TOOLS, tool_choice="none", max_tokens=2)
    first = hf_engine.generate([Message.user("Email bob@x.com saying hi")], tools=TOOLS, max_tokens=2)
    second = hf_engine.generate([Message.user("Email carol@x.com saying hi")], tools=TOOLS, max_tokens=2)
    assert first.usage.cached_prompt_tokens < 40  # the plain chat before shares only the system turn
    assert second.usage.prompt_tokens > 300
    assert second.usage.evaluated_prompt_tokens < 15  # the tools block was reused
