"""A bench or eval run that cannot run the model exits non-zero with the fix, and scores nothing.

llama-cpp-python is made absent in the child process (``sys.modules["llama_cpp"] = None``: its import
fails and ``find_spec`` finds nothing, as when it is not installed). Before, ``hammer bench accuracy``
and ``multi-turn`` exited 0 and wrote results in which every question had failed, the irrelevance
ones scored correct.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

WITHOUT_LLAMA_CPP = ("import sys; sys.modules['llama_cpp'] = None; from hammer_plugins.cli.main import main; "
                     "raise SystemExit(main(sys.argv[1:]))")


def _hammer_without_llama_cpp(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_LLAMA_CPP, *args], capture_output=True, text=True, timeout=300)


def _refused(done: subprocess.CompletedProcess[str], fix: str) -> None:
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and f"Fix: {fix}" in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("runner", ["hammer", "chatllamacpp", "llamacpp-tools"])
def test_bench_accuracy_stops_with_the_fix_and_scores_nothing(runner: str, tmp_path: Path) -> None:
    done = _hammer_without_llama_cpp("bench", "accuracy", "--model", "default", "--sample", "2", "--categories",
                                     "irrelevance,simple_python", "--runners", runner, "--out", str(tmp_path))
    _refused(done, "pip install" if runner == "chatllamacpp" else {"hammer": "pip install 'hammer-plugins[llama-cpp]'",
                                                                   "llamacpp-tools": "pip install 'hammer-evals[bench]'"}[runner])
    assert "cannot run the model" in done.stderr
    assert not (tmp_path / "accuracy.json").exists()  # no summary, no score
    records = tmp_path / "accuracy_records.jsonl"
    assert not records.exists() or records.read_text() == ""


def test_bench_multi_turn_stops_with_the_fix_and_scores_nothing(tmp_path: Path) -> None:
    done = _hammer_without_llama_cpp("bench", "multi-turn", "--sample", "1", "--categories", "multi_turn_base",
                                     "--out", str(tmp_path))
    _refused(done, "pip install 'hammer-plugins[llama-cpp]'")
    assert not (tmp_path / "multi_turn.json").exists()
    assert (tmp_path / "multi_turn_records.jsonl").read_text() == ""


@pytest.mark.parametrize("command", [["bench", "speed", "--repeats", "1"], ["eval", "academic", "--limit", "1"],
                                     ["eval", "hammerbench", "--limit", "1"]])
def test_speed_and_eval_stop_with_the_fix(command: list[str], tmp_path: Path) -> None:
    done = _hammer_without_llama_cpp(*command, "--out", str(tmp_path))
    _refused(done, "pip install 'hammer-plugins[llama-cpp]'")
    assert not (tmp_path / "speed.json").exists() and not list(tmp_path.rglob("*predictions*"))
