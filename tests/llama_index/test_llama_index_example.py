"""The LlamaIndex agent example runs as a user runs it, on the real default model."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llama_index_agent.py"


@pytest.mark.real_model
@pytest.mark.timeout(600)  # the example's process has 400 s
def test_agent_example_calls_the_tools_and_reports_their_results(default_model_path: str) -> None:
    run = subprocess.run([sys.executable, str(EXAMPLE), "--model-path", default_model_path],
                         capture_output=True, text=True, timeout=400, check=True)
    out = run.stdout
    assert "tool call: multiply({'a': 12.5, 'b': 4}) -> 50.0" in out
    days = re.search(r"tool call: days_until\(\{'date': '2030-01-01'\}\) -> (\d+)", out)
    assert days is not None
    assert "tool call: add({'a': 1234, 'b': 4321}) -> 5555" in out
    answers = re.findall(r"^answer: (.*?)  \[", out, re.MULTILINE)
    assert len(answers) == 3
    assert "50" in answers[0] and days.group(1) in answers[1] and "5555" in answers[2]
