"""``hammer vllm``: the paths of the shipped template and plugin, and command lines that use them (no vLLM needed)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from hammer_plugins.cli.main import main


def test_hammer_vllm_prints_existing_files_and_runnable_command_lines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vllm", "--json", "--model", "/models/my hammer", "--port", "8123"]) == 0
    facts = json.loads(capsys.readouterr().out)
    template, plugin = Path(facts["chat_template"]), Path(facts["tool_parser_plugin"])
    assert template.is_file() and template.name == "hammer.jinja"
    assert plugin.is_file() and plugin.name == "vllm_tool_parser.py"
    gpu = shlex.split(facts["vllm_serve"])
    assert gpu[:3] == ["vllm", "serve", "/models/my hammer"]  # quoted: a path with a space stays one argument
    for words in (gpu, shlex.split(facts["vllm_cpu"])):
        assert words[words.index("--chat-template") + 1] == str(template)
        assert words[words.index("--tool-parser-plugin") + 1] == str(plugin)
        assert words[words.index("--tool-call-parser") + 1] == "hammer"
        assert "--enable-auto-tool-choice" in words and words[words.index("--port") + 1] == "8123"
    assert "python -m vllm.entrypoints.openai.api_server" in facts["vllm_cpu"]  # vllm-cpu's `vllm` script fails


def test_hammer_vllm_text_names_both_files(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vllm"]) == 0
    out = capsys.readouterr().out
    assert "hammer.jinja" in out and "vllm_tool_parser.py" in out and "vllm serve MadeAgents/Hammer2.1-7b" in out
