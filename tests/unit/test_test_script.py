"""scripts/test.sh, the README's test command: the pytest run it makes, with which arguments, and its status.

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



@pytest.mark.parametrize("status", [0, 1, 5])
def test_the_whole_suite_is_one_run_on_two_workers(venv: Path, status: int) -> None:
    """Every test in one pytest run: 2 workers, a module whole on one, in the order tests/conftest.py gives (the
    slowest model modules first); the arguments passed on, pytest's status returned."""
    code, runs = run_script(venv, "-k", "x y", model=status)
    assert (code, runs) == (status, ["-m pytest -n 2 --dist loadfile --no-loadscope-reorder -k x y"])


def test_the_whole_run_confines_each_worker_to_its_cpus(venv: Path) -> None:
    log = venv.parent / "env.log"
    (venv / "bin" / "python").write_text('#!/bin/sh\nprintf "%s\\n" "${HAMMER_TEST_PIN_WORKERS:-unset}" >> "$ENV_LOG"\n')
    env = {**os.environ, "HAMMER_VENV": str(venv), "ENV_LOG": str(log), "HAMMER_SKIP_TOOL_INSTALLS": "1"}
    for args, pinned in (([], "1"), (["--fast"], "unset")):
        log.unlink(missing_ok=True)
        subprocess.run(["bash", str(ROOT / "scripts" / "test.sh"), *args], env={k: v for k, v in env.items()
                       if k != "HAMMER_TEST_PIN_WORKERS"}, capture_output=True, text=True, timeout=60)
        assert log.read_text().split()[-1] == pinned, args


def test_fast_runs_only_the_tests_without_a_model(venv: Path) -> None:
    """Less the tests that install from the package index: the developer loop needs no network."""
    assert run_script(venv, "--fast", "tests/unit") == (0, [f"-m pytest -n 2 -m {NO_MODEL} and not index tests/unit"])
    assert run_script(venv, "--fast", no_model=1)[0] == 1  # its status is pytest's


def test_markers_chosen_by_hand_run_one_serial_pytest(venv: Path) -> None:
    assert run_script(venv, "-m", "real_model", "tests/real", model=1) == (1, ["-m pytest -m real_model tests/real"])
