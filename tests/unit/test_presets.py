"""Hammer by name: presets and hub references resolved through a real Hugging Face cache, offline.

The cache is laid out as ``huggingface_hub`` writes it (refs, blobs, snapshots), seeded with the
stand-in GGUF under the preset's repo id; ``HF_HUB_OFFLINE=1``. The downloader is tested against a
hub on loopback (``HF_ENDPOINT``). Nothing reaches outside this machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hub_fixtures import COMMIT, HubState, loopback_hub, seed_cache

from hammer_plugins import HammerEngine, InvalidModelFileError, ModelNotFoundError, UnknownModelError
from hammer_plugins.models.presets import PRESETS, find_preset
from hammer_plugins.models.source import best_pulled_preset, fetch_gguf, resolve_model
from hammer_plugins.models.store import default_model_line, model_table

HAMMER = [sys.executable, "-m", "hammer_plugins.cli"]


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache, offline, with no model chosen by environment variables."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    for name, value in (("HF_HUB_CACHE", str(cache)), ("HF_HUB_OFFLINE", "1")):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.delenv("HAMMER_MODEL_PATH", raising=False)
    monkeypatch.delenv("HAMMER_MODEL", raising=False)
    return cache


def seed_preset(cache: Path, name: str, file: Path) -> Path:
    preset = find_preset(name)
    assert preset is not None and preset.gguf_repo and preset.gguf_file
    return seed_cache(cache, preset.gguf_repo, {preset.gguf_file: file}) / preset.gguf_file


@pytest.fixture
def small_gguf(tmp_path: Path) -> Path:
    """A file that is a GGUF by its magic, small enough to copy and serve (never loaded)."""
    path = tmp_path / "small.gguf"
    path.write_bytes(b"GGUF" + bytes(range(256)) * 8192)
    return path


def test_a_preset_and_a_repo_reference_resolve_to_the_cached_file(hf_cache: Path, default_model_path: str) -> None:
    cached = seed_preset(hf_cache, "hammer2.1-1.5b", Path(default_model_path))
    for reference in ("hammer2.1-1.5b", "Hammer2.1-1.5B", "mradermacher/Hammer2.1-1.5b-GGUF:Q4_K_M",
                      "mradermacher/Hammer2.1-1.5b-GGUF", "mradermacher/Hammer2.1-1.5b-GGUF/Hammer2.1-1.5b.Q4_K_M.gguf"):
        assert fetch_gguf(resolve_model(model=reference)) == cached, reference
    assert cached.is_symlink() and f"snapshots/{COMMIT}" in str(cached)  # the hub client's own layout
    # On transformers a preset is its Hugging Face checkpoint, not the GGUF.
    assert resolve_model(model="hammer2.1-1.5b", gguf=False).location == "MadeAgents/Hammer2.1-1.5b"


def test_the_best_pulled_model_becomes_the_default_with_its_prompt_layout(hf_cache: Path, small_gguf: Path) -> None:
    assert resolve_model().is_default and "stand-in" in default_model_line()
    assert "hammer pull hammer2.1-1.5b" in default_model_line()
    seed_preset(hf_cache, "hammer2.0-0.5b", small_gguf)
    assert best_pulled_preset() == find_preset("hammer2.0-0.5b")
    assert HammerEngine().prompt_format == "hammer2.0"  # Hammer 2.0's layout, chosen automatically
    seed_preset(hf_cache, "hammer2.1-1.5b", small_gguf)
    source = resolve_model()
    assert source.preset == find_preset("hammer2.1-1.5b") and not source.is_default  # newest release wins
    assert HammerEngine().prompt_format == "hammer2.1"
    assert default_model_line() == "model: hammer2.1-1.5b (pulled; license CC-BY-NC-4.0)"
    assert HammerEngine(prompt_format="hammer1.0").prompt_format == "hammer1.0"  # the user's choice wins
    rows = {row["name"]: row for row in model_table()}
    assert rows["hammer2.1-1.5b"]["downloaded"] and rows["hammer2.1-1.5b"]["downloaded_bytes"] == small_gguf.stat().st_size
    assert not rows["hammer2.1-7b"]["downloaded"] and rows["hammer2.1-7b"]["license"] == "CC-BY-NC-4.0"


def test_an_unknown_preset_lists_the_known_ones_and_the_closest(hf_cache: Path) -> None:
    with pytest.raises(UnknownModelError) as info:
        HammerEngine(model="hammer2.1-1.6b").load()
    message = str(info.value)
    assert "did you mean hammer2.1-1.5b" in message and all(p.name in message for p in PRESETS)


def test_offline_without_the_file_names_the_cache_and_the_pull_command(hf_cache: Path) -> None:
    engine = HammerEngine(model="hammer2.1-3b")
    with pytest.raises(ModelNotFoundError) as info:
        engine.load()
    assert str(hf_cache) in str(info.value) and "hammer pull hammer2.1-3b" in str(info.value)
    assert "HF_HUB_OFFLINE" in str(info.value)


def test_a_repo_without_a_matching_gguf_lists_the_files_it_has(hf_cache: Path, small_gguf: Path) -> None:
    seed_cache(hf_cache, "someone/Tool-GGUF", {"tool.Q8_0.gguf": small_gguf, "README.md": small_gguf})
    with pytest.raises(ModelNotFoundError) as info:
        fetch_gguf(resolve_model(model="someone/Tool-GGUF:Q4_K_M"))
    assert "tool.Q8_0.gguf" in str(info.value) and "README.md" not in str(info.value).split("GGUF files:")[1]
    assert fetch_gguf(resolve_model(model="someone/Tool-GGUF:q8_0")).name == "tool.Q8_0.gguf"


def test_a_truncated_or_damaged_download_says_to_download_it_again(hf_cache: Path, tmp_path: Path,
                                                                   default_model_path: str) -> None:
    truncated = tmp_path / "truncated.gguf"
    with open(default_model_path, "rb") as source:
        truncated.write_bytes(source.read(4 << 20))  # the first 4 MB of a real GGUF
    seed_preset(hf_cache, "hammer2.1-0.5b", truncated)
    with pytest.raises(InvalidModelFileError, match=r"hammer pull hammer2\.1-0\.5b --force"):
        HammerEngine(model="hammer2.1-0.5b").load()
    damaged = tmp_path / "damaged.gguf"
    damaged.write_bytes(b"<html>not a model</html>")
    seed_preset(hf_cache, "hammer2.0-0.5b", damaged)
    with pytest.raises(InvalidModelFileError, match=r"hammer pull hammer2\.0-0\.5b --force"):
        fetch_gguf(resolve_model(model="hammer2.0-0.5b"))


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HAMMER_MODEL_PATH", "HAMMER_MODEL")}
    return {**env, "HF_HUB_CACHE": str(cache), **extra}


def test_pull_downloads_with_progress_and_resumes_a_dropped_download(hf_cache: Path) -> None:
    # Over huggingface_hub's 10 MB read chunk, so the drop comes after a chunk was written to disk.
    content = b"GGUF" + bytes(range(256)) * (96 * 1024)
    cut = 15 << 20
    state = HubState({"someone/Tool-GGUF/tool.Q4_K_M.gguf": content}, cut_after=cut)
    with loopback_hub(state) as endpoint:
        # TQDM_POSITION=-1: huggingface_hub's switch to draw its progress bar when stderr is not a terminal.
        env = _env(hf_cache, HF_ENDPOINT=endpoint, HF_HUB_OFFLINE="0", HF_HUB_DISABLE_XET="1",
                   HF_HUB_DOWNLOAD_TIMEOUT="20", TQDM_POSITION="-1")
        run = subprocess.run([*HAMMER, "pull", "someone/Tool-GGUF/tool.Q4_K_M.gguf"], env=env, capture_output=True,
                             text=True, timeout=120)
        if run.returncode != 0:  # the dropped connection ended this attempt: the next pull resumes it
            assert list(hf_cache.rglob("*.incomplete")), run.stderr
            run = subprocess.run([*HAMMER, "pull", "someone/Tool-GGUF/tool.Q4_K_M.gguf"], env=env,
                                 capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    path = Path(run.stdout.strip().splitlines()[-1])
    assert path.read_bytes() == content and f"snapshots/{COMMIT}" in str(path)
    ranges = [r for method, _, r in state.requests if method == "GET" and r]
    assert ranges, state.requests  # the second request asked only for the rest ...
    resumed_at = int(ranges[0].removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_at <= cut  # ... from what the dropped one had written
    assert "pulling someone/Tool-GGUF/tool.Q4_K_M.gguf" in run.stderr
    assert "tool.Q4_K_M.gguf" in run.stderr and "100%" in run.stderr  # huggingface_hub's progress bar


@pytest.mark.real_model
def test_hammer_call_by_preset_name_and_the_pulled_default(hf_cache: Path, default_model_path: str) -> None:
    seed_preset(hf_cache, "hammer2.1-1.5b", Path(default_model_path))
    env = _env(hf_cache, HF_HUB_OFFLINE="1")
    for extra in (["--model", "hammer2.1-1.5b"], []):
        run = subprocess.run([*HAMMER, "call", "What's the weather in Paris?", "--threads", "2", *extra], env=env,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        calls: list[dict[str, Any]] = json.loads(run.stdout)
        assert calls[0]["name"] == "get_weather" and calls[0]["arguments"]["city"] == "Paris"
    assert "model: hammer2.1-1.5b (pulled; license CC-BY-NC-4.0)" in run.stderr  # the default, said
    models = subprocess.run([*HAMMER, "models", "--json"], env=env, capture_output=True, text=True, timeout=60)
    rows = {row["name"]: row for row in json.loads(models.stdout)}
    assert rows["hammer2.1-1.5b"]["downloaded"].endswith("Hammer2.1-1.5b.Q4_K_M.gguf")


def test_gpu_settings_reach_the_runtimes(hf_cache: Path, small_gguf: Path) -> None:
    """device/dtype (transformers) and n_gpu_layers (llama.cpp) are passed through as documented."""
    from langchain_hammer import ChatHammer

    llama = ChatHammer(model_path=str(small_gguf), n_gpu_layers=-1)._engine().backend
    assert llama.n_gpu_layers == -1
    transformers = HammerEngine(model="hammer2.1-1.5b", backend="transformers", device="cuda", dtype="bfloat16").backend
    assert (transformers.device_option, transformers.dtype_option) == ("cuda", "bfloat16")
    assert transformers.source.location == "MadeAgents/Hammer2.1-1.5b"  # the preset's checkpoint on transformers


def test_models_by_name_without_huggingface_hub_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # As after `pip install "langchain-hammer[llama-cpp]"` before huggingface-hub was in that extra.
    from hammer_plugins import BackendNotInstalledError
    from hammer_plugins.models.store import pull

    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # not importable, and find_spec finds nothing
    fix = r"need huggingface_hub.*Fix: pip install 'hammer-plugins\[llama-cpp\]'"
    for attempt in (model_table, lambda: pull("hammer2.1-1.5b")):
        with pytest.raises(BackendNotInstalledError, match=fix):
            attempt()
    assert best_pulled_preset() is None  # the default model path still works without it


def test_hammer_bench_takes_a_preset_once_pulled(hf_cache: Path, small_gguf: Path) -> None:
    """`hammer bench --model <preset>`, as docs/benchmarks.md says: the pulled file; not pulled, the pull command."""
    from hammer_evals.bfcl.machine import resolve_model as bench_model

    with pytest.raises(FileNotFoundError, match="not pulled here. Fix: hammer pull hammer2.1-1.5b"):
        bench_model("hammer2.1-1.5b")
    cached = seed_preset(hf_cache, "hammer2.1-1.5b", small_gguf)
    assert bench_model("hammer2.1-1.5b") == ("hammer2.1-1.5b", str(cached))
    with pytest.raises(FileNotFoundError, match="neither 'default', 'smollm2', a preset"):
        bench_model("no-such-model-anywhere")
