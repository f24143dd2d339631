"""scripts/test.sh, the README's test command: its phases and how their pytest exit statuses combine.

Run against a stand-in venv (``HAMMER_VENV``) whose ``python`` logs its arguments and answers pytest with
the status a test asks for, so no test runs twice; install.sh finds its stamp and returns at once."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NO_MODEL = "not real_model and not transformers_model and not vllm"
MODEL = "real_model or transformers_model or vllm"


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(
        '#!/bin/sh\nprintf "%s\\n" "$*" >> "$ARGS_LOG"\n'
        'case "$*" in\n'
        '  *"-m pytest"*"not real_model"*) exit "$NO_MODEL_STATUS" ;;\n'
        '  *"-m pytest"*) exit "$MODEL_STATUS" ;;\n'
        "esac\nexit 0\n")
    (bin_dir / "python").chmod(0o755)
    (bin_dir / "hammer").write_text("#!/bin/sh\n")
    (bin_dir / "hammer").chmod(0o755)
    projects = ["pyproject.toml", "integrations/langchain/pyproject.toml", "integrations/llama-index/pyproject.toml",
                "evals/pyproject.toml", "scripts/install.sh"]
    stamp = hashlib.sha256(b"".join((ROOT / p).read_bytes() for p in projects)).hexdigest()
    (tmp_path / "venv" / ".hammer-installed").write_text(stamp + "\n")
    return tmp_path / "venv"


def run_script(venv: Path, *args: str, no_model: int = 0, model: int = 0) -> tuple[int, list[str]]:
    log = venv.parent / "args.log"
    env = {**os.environ, "HAMMER_VENV": str(venv), "ARGS_LOG": str(log), "NO_MODEL_STATUS": str(no_model),
           "MODEL_STATUS": str(model), "HAMMER_SKIP_TOOL_INSTALLS": "1"}  # no npm, no apt-get: no network here
    done = subprocess.run(["bash", str(ROOT / "scripts" / "test.sh"), *args], env=env, capture_output=True, text=True,
                          timeout=60)
    pytest_runs = [line for line in log.read_text().splitlines() if line.startswith("-m pytest")] if log.exists() else []
    return done.returncode, pytest_runs



@pytest.mark.parametrize(("no_model", "model", "status"), [
    (0, 0, 0), (5, 0, 0), (0, 5, 0), (5, 5, 5), (1, 0, 1), (0, 1, 1), (5, 1, 1), (1, 3, 1), (3, 0, 3)])
def test_two_phases_combine_their_statuses(venv: Path, no_model: int, model: int, status: int) -> None:
    """A phase that selects nothing (5) fails nothing; any failure fails; the first failing phase's status wins."""
    code, runs = run_script(venv, "-k", "x y", no_model=no_model, model=model)
    assert code == status
    assert runs[0] == f"-m pytest -n 2 -m {NO_MODEL} -k x y"  # no-model tests on 2 workers, the arguments passed on
    if no_model == 3:  # pytest was interrupted (internal error): the model phase does not start
        assert len(runs) == 1
    else:
        # model tests on 2 workers, a module whole on one, the slowest first (tests/conftest.py)
        assert runs[1] == f"-m pytest -n 2 --dist loadfile --no-loadscope-reorder -m {MODEL} -k x y"


def test_fast_runs_only_the_no_model_phase(venv: Path) -> None:
    """Less the tests that install from the package index: the developer loop needs no network."""
    assert run_script(venv, "--fast", "tests/unit") == (0, [f"-m pytest -n 2 -m {NO_MODEL} and not index tests/unit"])
    assert run_script(venv, "--fast", model=1)[0] == 0  # the model phase is not run at all


def test_exitfirst_stops_before_the_model_phase_after_a_failure(venv: Path) -> None:
    code, runs = run_script(venv, "-x", no_model=1)
    assert code == 1 and len(runs) == 1


def test_markers_chosen_by_hand_run_one_serial_pytest(venv: Path) -> None:
    assert run_script(venv, "-m", "real_model", "tests/real", model=1) == (1, ["-m pytest -m real_model tests/real"])
