"""The `hammer` command on the embedded default model: the README's command as a user runs it (a process of
its own), the others through the same entry point in this process (``hammer_plugins.cli.main.main``: the same
parser, commands and exit status, without an interpreter start and imports for each)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.real_model
ROOT = Path(__file__).resolve().parents[2]
HAMMER = [sys.executable, "-m", "hammer_plugins.cli"]


@pytest.fixture
def run(hammer_main: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.chdir(ROOT)  # examples/tools.json, as in the README
    return hammer_main


def test_call_with_the_demo_tools_and_no_other_argument() -> None:
    """The README's command, as its own process (the console script's path: it ends the process at once)."""
    result = subprocess.run([*HAMMER, "call", "What's the weather in Paris?"], capture_output=True, text=True,
                            timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    calls = json.loads(result.stdout)
    assert calls == [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]


def test_call_with_a_tools_file_and_masking(run: Any) -> None:
    result = run("call", "Email bob@x.com saying hi", "--tools", "examples/tools.json", "--mask-names", "-v")
    assert result.returncode == 0, result.stderr
    calls = json.loads(result.stdout)
    assert calls[0]["name"] == "send_email" and calls[0]["arguments"]["to"] == "bob@x.com"
    assert "prompt +" in result.stderr  # -v reports usage and timings


def test_call_refusal_prints_an_empty_list(run: Any) -> None:
    result = run("call", "Write a poem about the sea")
    assert result.returncode == 0
    assert result.stdout.strip() == "[]" and "refusal:" in result.stderr


def test_chat_runs_python_tools_over_several_turns(run: Any) -> None:
    result = run("chat", "--tools", "examples/tools.py", "--yes", "--max-tokens", "80",
                 stdin="What is 17 * 23?\nHow many days between 2024-01-01 and 2024-03-01?\n")
    assert result.returncode == 0, result.stderr
    assert 'call calculate({"expression": "17 * 23"})' in result.stdout and "-> 391" in result.stdout
    assert "call days_between(" in result.stdout and "-> 60" in result.stdout
    answers = [line for line in result.stdout.split("hammer> ")[1:]]
    assert len(answers) == 2
    assert "391" in answers[0] and "60" in answers[1]  # answered from the tools' results


def test_info_names_model_backend_and_versions(run: Any) -> None:
    result = run("info")
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert facts["backend"] == "llama_cpp" and "Qwen2.5-Coder-0.5B" in facts["model"]
    assert facts["context_window"] == 8192 and facts["llama_cpp_python"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["call", "hi", "--model-path", "/nope/missing.gguf"], "does not exist"),
        (["call", "hi", "--tools", "/nope/tools.json"], "tools file"),
        (["call", "hi", "--tool-choice", "get_time"], "not among the bound tools"),
    ],
)
def test_bad_input_gets_a_clear_error_not_a_traceback(run: Any, args: list[str], message: str) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
