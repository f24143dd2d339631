"""examples/quickstart.ipynb runs top to bottom on the default model, and is stored without outputs."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "quickstart.ipynb"


def test_the_notebook_is_stored_without_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


@pytest.mark.real_model
@pytest.mark.timeout(900)  # every cell may take 600 s
def test_the_notebook_runs_top_to_bottom(tmp_path: Path) -> None:
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    text = ["".join(o.get("text", "") for o in cell.outputs) for cell in notebook.cells if cell.cell_type == "code"]
    assert "stand-in" in text[0] or "model: hammer" in text[0]
    assert "tool_calls [('get_weather', {'city': 'Paris'" in text[1]
    assert text[2].startswith("refusal - Sorry, no tool is suitable")
    assert "call: send_email" in text[3]
    assert "you get: [('get_weather', {'city': 'Tokyo'" in text[4] and "get_weather" not in text[4].split("you get")[0]
    assert "1081" in text[5]
    assert "50" in text[6]
    # The views: each shown as a table (text/html) whose plain repr stays one line.
    views = [cell.outputs for cell in notebook.cells if cell.cell_type == "code"][7:]
    html = [next(o["data"]["text/html"] for o in outputs if "data" in o) for outputs in views]
    plain = [next(o["data"]["text/plain"] for o in outputs if "data" in o) for outputs in views]
    assert all(page.startswith('<table class="hammer">') for page in html) and all("\n" not in p for p in plain)
    assert "get_weather" in html[0] and "Paris" in html[0] and "prompt +" in html[0]
    assert plain[0].startswith("HammerResponse(kind='tool_calls', calls=[get_weather(city='Paris'")
    assert "the model reads" in html[1] and "≈" in html[1] and html[1].count("<tr>") == 3  # header + 2 tools
    assert "Snapshot" in html[2] and "turn" in html[2] and plain[2].startswith("Snapshot(turn=")
    turns = html[3].split("<caption>turns</caption>", 1)[1]
    assert turns.count("<tr>") == 4  # header + one row per user turn
