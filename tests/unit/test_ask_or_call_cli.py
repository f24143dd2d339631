"""`hammer call` and `hammer chat` ask for a value nobody gave (their default), and the chat's next turn completes
the call. Scripted backend: the command's engine is replaced, its settings read from the parsed flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.cli import main as cli

PAY_FINE = {"name": "pay_fine", "description": "Pay a traffic fine", "parameters": {"type": "object", "properties": {
    "city": {"type": "string", "description": "Violating city"},
    "plate": {"type": "string", "description": "License plate number"}}, "required": ["city", "plate"]}}
INVENTED = '[{"name": "pay_fine", "arguments": {"city": "Guangzhou", "plate": "ABC123"}}]'


@pytest.fixture
def tools_file(tmp_path: Path) -> str:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([PAY_FINE]), encoding="utf-8")
    return str(path)


def scripted(monkeypatch: pytest.MonkeyPatch, *outputs: str) -> list[Any]:
    seen: list[Any] = []

    def engine(args: Any) -> HammerEngine:
        seen.append(args.on_missing)
        return HammerEngine(backend=ScriptedBackend(list(outputs)), on_missing=args.on_missing)

    monkeypatch.setattr(cli, "_engine", engine)
    return seen


def test_hammer_call_asks_by_default(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                     tools_file: str) -> None:
    seen = scripted(monkeypatch, INVENTED)
    assert cli.main(["call", "Pay my traffic fine in Guangzhou", "--tools", tools_file]) == 0
    out, err = capsys.readouterr()
    assert seen == ["ask"] and out.strip() == "Please provide the license plate number."
    assert 'pending: pay_fine({"city": "Guangzhou"}), missing plate' in err


def test_hammer_call_on_missing_call_prints_the_model_s_call(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str], tools_file: str) -> None:
    scripted(monkeypatch, INVENTED)
    assert cli.main(["call", "Pay my traffic fine in Guangzhou", "--tools", tools_file, "--on-missing", "call"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"name": "pay_fine",
                                                    "arguments": {"city": "Guangzhou", "plate": "ABC123"}}]


def test_hammer_chat_asks_then_the_answer_completes_the_call(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str], tools_file: str) -> None:
    scripted(monkeypatch, INVENTED, '[{"name": "pay_fine", "arguments": {"plate": "D456"}}]', "Paid.")
    lines = iter(["Pay my traffic fine in Guangzhou", "D456", ""])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    assert cli.main(["chat", "--tools", tools_file]) == 0
    out = capsys.readouterr().out
    assert "hammer> Please provide the license plate number." in out
    assert 'call pay_fine({"city": "Guangzhou", "plate": "D456"})' in out


def test_hammer_chat_keeps_a_call_held_beside_one_that_ran(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A parallel answer: the weather call runs, the fine is held; the answer after the result asks for the plate,
    and the user's next line completes the fine with the city given at first."""
    tools = tmp_path / "tools.py"
    tools.write_text('def get_weather(city: str) -> str:\n    """Weather of a city."""\n    return "sunny"\n\n\n'
                     'def pay_fine(city: str, plate: str) -> str:\n    """Pay a traffic fine."""\n    return "paid"\n',
                     encoding="utf-8")
    scripted(monkeypatch, '[{"name": "get_weather", "arguments": {"city": "Guangzhou"}}, '
                          '{"name": "pay_fine", "arguments": {"city": "Guangzhou", "plate": "ABC123"}}]',
             "It is sunny.", '[{"name": "pay_fine", "arguments": {"plate": "D456"}}]', "Paid.")
    lines = iter(["Weather in Guangzhou, and pay my fine there", "D456", ""])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    assert cli.main(["chat", "--tools", str(tools), "--yes"]) == 0
    out = capsys.readouterr().out
    assert "hammer> It is sunny.\n\nPlease provide the plate." in out
    assert 'call pay_fine({"city": "Guangzhou", "plate": "D456"})' in out and "-> paid" in out
