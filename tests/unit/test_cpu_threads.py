"""The default decode thread count (hammer_plugins/support/cpu_threads.py): one per physical core, as
llama.cpp's own tools choose, read from a sysfs-shaped topology."""

from __future__ import annotations

from pathlib import Path

import pytest

from hammer_plugins.support import cpu_threads as _cpu_threads


def topology(tmp_path: Path, siblings: dict[int, str]) -> Path:
    for cpu, listed in siblings.items():
        folder = tmp_path / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "thread_siblings_list").write_text(listed + "\n")
    return tmp_path


@pytest.mark.parametrize(("siblings", "cores"), [
    ({0: "0", 1: "1"}, 2),                          # a VM whose vCPUs are cores: llama-cpp-python would use 1
    ({0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"}, 2),  # two cores, two hardware threads each
    ({0: "0-1", 1: "0-1"}, 1),
])
def test_hardware_threads_of_one_core_count_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   siblings: dict[int, str], cores: int) -> None:
    monkeypatch.setattr(_cpu_threads, "_usable_cpus", lambda: sorted(siblings))
    assert _cpu_threads.physical_cores(topology(tmp_path, siblings)) == cores


def test_an_unreadable_topology_falls_back_to_half_the_cpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_cpu_threads, "_usable_cpus", lambda: [0, 1, 2, 3])
    assert _cpu_threads.physical_cores(tmp_path / "missing") == 2


@pytest.mark.real_model
def test_the_llama_cpp_backend_decodes_on_every_physical_core(default_model_path: str) -> None:
    """The real model, loaded with nothing set, decodes on one thread per physical core (not
    llama-cpp-python's half the logical CPUs); an explicit ``n_threads`` still wins."""
    from hammer_plugins.backends.llama_cpp import LlamaCppBackend

    default = LlamaCppBackend(default_model_path, n_ctx=512)
    default.load()
    assert default.llama.n_threads == _cpu_threads.physical_cores()
    chosen = LlamaCppBackend(default_model_path, n_ctx=512, n_threads=1)
    chosen.load()
    assert chosen.llama.n_threads == 1
