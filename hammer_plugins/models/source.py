"""Where the model comes from: a path, a preset name, a hub id, an environment variable, or the default.

``model=`` takes a preset (``"hammer2.1-1.5b"``, :mod:`hammer_plugins.models.presets`), a local ``.gguf``
file or checkpoint directory, or a Hugging Face repo: ``"owner/repo"`` (a checkpoint for
transformers; for llama.cpp its ``Q4_K_M`` GGUF), ``"owner/repo:Q8_0"`` (the GGUF of that
quantization, as ``llama-server -hf`` and ollama spell it) or ``"owner/repo/file.gguf"``. Hub files
come through ``huggingface_hub``: its cache (``HF_HOME``), ``HF_HUB_OFFLINE``, tokens and revisions.

Resolution order: ``model_path=`` (a file or directory), ``model=``, ``$HAMMER_MODEL_PATH``,
``$HAMMER_MODEL``, then the best Hammer model already pulled (``hammer pull``; on llama.cpp), then
the embedded default.

The embedded default (:mod:`hammer_plugins.models.default`) is Qwen2.5-Coder-0.5B-Instruct, the
base model of Hammer2.1-0.5b, shipped on PyPI; it is not a Hammer fine-tune.

Example:
    >>> resolve_model(model="hammer2.1-0.5b").preset.name
    'hammer2.1-0.5b'
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hammer_plugins.models.default import DEFAULT_MODEL_NAME, default_model_path
from hammer_plugins.models.presets import PRESETS, Preset, closest_presets, find_preset, looks_like_a_preset
from hammer_plugins.values.errors import (
    BackendNotInstalledError,
    InvalidModelFileError,
    ModelNotFoundError,
    UnknownModelError,
)

_LOG = logging.getLogger("hammer_plugins")
DEFAULT_QUANT = "Q4_K_M"
"""The quantization picked from a GGUF repository when none is named (the one most people run)."""


@dataclass(frozen=True)
class ModelSource:
    """A resolved model: a local GGUF file, a local checkpoint directory, a hub checkpoint, or a hub GGUF.

    ``kind`` is ``"gguf"``, ``"directory"``, ``"hub"`` (a checkpoint repo for transformers) or
    ``"hub_gguf"`` (``location`` a repo, ``filename`` its file, or ``quant`` to pick one).

    Example:
        >>> resolve_model(model="hammer2.1-1.5b").display_name
        'hammer2.1-1.5b (mradermacher/Hammer2.1-1.5b-GGUF, Hammer2.1-1.5b.Q4_K_M.gguf; CC-BY-NC-4.0)'
    """

    kind: str
    location: str
    is_default: bool = False
    filename: str | None = None
    quant: str | None = None
    revision: str | None = None
    preset: Preset | None = None

    @property
    def display_name(self) -> str:
        if self.is_default:
            return DEFAULT_MODEL_NAME
        if self.kind == "hub_gguf":
            what = f"{self.location}, {self.filename or self.quant}"
            return f"{self.preset.name} ({what}; {self.preset.license})" if self.preset else what
        if self.preset is not None:
            return f"{self.preset.name} ({self.location}; {self.preset.license})"
        return self.location

    @property
    def short_name(self) -> str:
        """The model as people call it: the preset name, the file name, or the repo id."""
        if self.preset is not None:
            return self.preset.name
        return Path(self.filename or self.location).name if self.kind != "hub" else self.location

    @property
    def pull_name(self) -> str:
        """What ``hammer pull`` takes for this hub model: the preset, ``owner/repo/file`` or ``owner/repo:quant``."""
        if self.preset is not None:
            return self.preset.name
        return f"{self.location}/{self.filename}" if self.filename else f"{self.location}:{self.quant or DEFAULT_QUANT}"

    @property
    def prompt_format(self) -> str | None:
        """The prompt layout this model was trained on, when known (a preset)."""
        return self.preset.prompt_format if self.preset else None


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


def resolve_model(model_path: str | os.PathLike[str] | None = None, model: str | None = None, *,
                  gguf: bool = True, revision: str | None = None) -> ModelSource:
    """Pick the model to load (the order is in the module docstring). Nothing is downloaded here.

    ``gguf``: the backend reads GGUF files (llama.cpp) rather than checkpoints (transformers).
    """
    path = str(model_path) if model_path else os.environ.get("HAMMER_MODEL_PATH") if not model else None
    if path:
        candidate = Path(path).expanduser()
        if candidate.is_dir():
            return ModelSource("directory", str(candidate))
        return ModelSource("gguf", str(check_gguf(candidate)))
    name = model or os.environ.get("HAMMER_MODEL")
    if name:
        return _from_name(name, gguf=gguf, revision=revision)
    if gguf:
        pulled = best_pulled_preset()
        if pulled is not None:
            _LOG.info("hammer-plugins: no model given; using %s, pulled earlier (license %s)",
                      pulled.name, pulled.license)
            return ModelSource("hub_gguf", pulled.gguf_repo or "", filename=pulled.gguf_file, preset=pulled)
    return ModelSource("gguf", str(default_model_path()), is_default=True)


_HUB_QUANT = re.compile(r"^([\w.-]+/[\w.-]+):([\w.-]+)$")


def _from_name(name: str, *, gguf: bool, revision: str | None) -> ModelSource:
    preset = find_preset(name)
    if preset is not None:
        if not gguf:
            return ModelSource("hub", preset.hf_repo, revision=revision, preset=preset)
        if preset.gguf_repo is None:
            raise ModelNotFoundError(
                f"no GGUF conversion of {preset.name} is known, so llama.cpp cannot run it. Fix: use "
                f"backend='transformers' (it loads {preset.hf_repo}), or pass model='<owner>/<repo>:Q4_K_M' "
                "for a GGUF repository you trust.")
        return ModelSource("hub_gguf", preset.gguf_repo, filename=preset.gguf_file, revision=revision, preset=preset)
    local = Path(name).expanduser()
    if local.is_dir():
        return ModelSource("directory", str(local))
    if local.exists() or local.suffix == ".gguf" and (name.startswith((".", "/", "~")) or name.count("/") < 2):
        return ModelSource("gguf", str(check_gguf(local)))
    if looks_like_a_preset(name):
        near = closest_presets(name)
        raise UnknownModelError(
            f"{name!r} is not a known Hammer model" + (f" (did you mean {', '.join(near)}?)" if near else "")
            + f". Known presets: {', '.join(p.name for p in PRESETS)}. Fix: use one of those, a Hugging Face repo "
            "id ('owner/repo', 'owner/repo:Q4_K_M', 'owner/repo/file.gguf') or a local .gguf path.")
    quant = _HUB_QUANT.match(name)
    if quant:
        return ModelSource("hub_gguf", quant.group(1), quant=quant.group(2), revision=revision)
    parts = name.split("/")
    if len(parts) >= 3 and name.endswith(".gguf"):
        return ModelSource("hub_gguf", "/".join(parts[:2]), filename="/".join(parts[2:]), revision=revision)
    if len(parts) == 2 and gguf:
        return ModelSource("hub_gguf", name, quant=DEFAULT_QUANT, revision=revision)
    if len(parts) == 2:
        return ModelSource("hub", name, revision=revision)
    raise ModelNotFoundError(
        f"model {name!r} is neither a local file or directory, a preset nor a Hugging Face repo id. Fix: pass a "
        f"path, a preset ({', '.join(p.name for p in PRESETS[:4])}, ...) or 'owner/repo'.")


# ------------------------------------------------------------------ the Hugging Face hub
def require_hub() -> None:
    """Raise a :class:`BackendNotInstalledError` naming the fix when ``huggingface_hub`` is not installed.

    Every path to the hub (``hammer pull``, ``hammer models``, a preset or repo name) starts here, so a
    missing client is one clear line, not a ``ModuleNotFoundError`` from deep inside.
    """
    if importlib.util.find_spec("huggingface_hub") is None:
        raise BackendNotInstalledError(
            "Hammer models by name (`hammer pull`, `hammer models`, model='hammer2.1-1.5b') need huggingface_hub, "
            "which is not installed. Fix: pip install 'hammer-plugins[llama-cpp]' (or pip install huggingface-hub)")


def hub_cache_dir() -> Path:
    """Where ``huggingface_hub`` keeps downloads (``$HF_HUB_CACHE``, ``$HF_HOME/hub``, ...)."""
    require_hub()
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _endpoint() -> str:
    from huggingface_hub import constants

    return str(constants.ENDPOINT)


def cached_gguf(source: ModelSource) -> Path | None:
    """The hub GGUF's file in the local cache, or None when it has not been downloaded (no network used)."""
    require_hub()
    from huggingface_hub import try_to_load_from_cache

    filename = source.filename or _pick_file(source, _cached_files(source.location, source.revision))
    found = try_to_load_from_cache(source.location, filename, revision=source.revision)
    return Path(found) if isinstance(found, str) else None


def fetch_gguf(source: ModelSource, force: bool = False, token: str | bool | None = None) -> Path:
    """The hub GGUF as a local file: from the cache, or downloaded once (with a progress bar).

    Raises a :class:`ModelNotFoundError` that names the cache and the ``hammer pull`` command when the
    file is not cached and the hub cannot be reached, and lists the repo's GGUF files when none matches.
    """
    require_hub()
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError, RepositoryNotFoundError

    name = source.pull_name
    try:
        filename = source.filename or _pick_file(source, _repo_files(source.location, source.revision, token))
        path = Path(hf_hub_download(source.location, filename, revision=source.revision, force_download=force,
                                    token=token))
    except LocalEntryNotFoundError as exc:
        why = "HF_HUB_OFFLINE is set" if _offline() else f"cannot reach the hub ({_endpoint()})"
        raise ModelNotFoundError(
            f"cannot reach the Hugging Face hub for {name}: it is not in the Hugging Face cache ({hub_cache_dir()}) "
            f"and {why}. Fix: run `hammer pull {name}` where the hub can be reached (network on, HF_HUB_OFFLINE "
            "unset; then copy the cache here), or pass model_path=<a local .gguf file>."
        ) from exc
    except (RepositoryNotFoundError, EntryNotFoundError) as exc:
        raise ModelNotFoundError(f"{name}: {exc}. Fix: check the repo id and file name (or log in with "
                                 "`hf auth login` for a private or gated repo).") from exc
    try:
        return check_gguf(path)
    except InvalidModelFileError as exc:
        raise InvalidModelFileError(f"{exc} Fix: download it again with `hammer pull {name} --force`.") from exc


def local_gguf(source: ModelSource) -> Path:
    """The GGUF file ``source`` names, on disk: a checked local path, or the hub file (cached or downloaded).

    Raises a clear error for a checkpoint directory (llama.cpp reads GGUF files only).
    """
    if source.kind == "hub_gguf":
        return fetch_gguf(source)
    if source.kind != "gguf":
        raise InvalidModelFileError(
            f"{source.location!r} is not a GGUF file but a {source.kind}. Fix: pass a .gguf path or a preset "
            "(`hammer pull <preset>` downloads its GGUF), or use backend='transformers' for a checkpoint.")
    return check_gguf(Path(source.location))


def _repo_files(repo: str, revision: str | None, token: str | bool | None) -> list[str]:
    """The repo's files: from the hub, or from the cache when offline."""
    require_hub()
    if _offline():
        return _cached_files(repo, revision)
    from huggingface_hub import list_repo_files
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    try:
        return list(list_repo_files(repo, revision=revision, token=token))
    except HfHubHTTPError:  # the hub answered (no such repo, gated, ...): fetch_gguf says which
        raise
    except Exception as exc:
        # The transport's own error (httpx's ConnectError, a timeout, DNS): the hub cannot be reached,
        # as hf_hub_download reports it, so that fetch_gguf gives the same one line.
        names = {cls.__name__ for cls in type(exc).__mro__}
        if isinstance(exc, OSError) or names & {"ConnectError", "TimeoutException", "NetworkError", "TransportError"}:
            raise LocalEntryNotFoundError(f"cannot list {repo}'s files: {exc}") from exc
        raise


def _cached_files(repo: str, revision: str | None) -> list[str]:
    from huggingface_hub import scan_cache_dir

    try:
        info = scan_cache_dir(hub_cache_dir())
    except Exception:  # noqa: BLE001 - no cache yet, or an unreadable one: nothing is cached
        return []
    files: set[str] = set()
    for cached in info.repos:
        if cached.repo_id == repo and cached.repo_type == "model":
            for rev in cached.revisions:
                if revision is None or revision in rev.refs or rev.commit_hash.startswith(revision):
                    files |= {f.file_name if "/" not in str(f.file_path) else
                              str(f.file_path.relative_to(rev.snapshot_path)) for f in rev.files}
    return sorted(files)


def _pick_file(source: ModelSource, files: list[str]) -> str:
    """The GGUF of ``source.quant`` among ``files`` (a single-file split first part included)."""
    ggufs = [f for f in files if f.lower().endswith(".gguf")]
    quant = (source.quant or DEFAULT_QUANT).lower()
    matches = [f for f in ggufs if re.search(rf"(^|[._\-/]){re.escape(quant)}([._\-]|\.gguf$)", f.lower())]
    if matches:
        return sorted(matches, key=len)[0]
    where = "in the cache" if _offline() else "in the repo"
    listed = ", ".join(ggufs) if ggufs else "none"
    raise ModelNotFoundError(
        f"{source.location} has no GGUF file for {source.quant or DEFAULT_QUANT} {where}; its GGUF files: {listed}. "
        f"Fix: name one of them ('{source.location}/<file>.gguf' or '{source.location}:<quant>'), or use "
        "backend='transformers' for a checkpoint repo.")


def pulled_presets() -> list[tuple[Preset, Path]]:
    """The preset GGUFs already in the Hugging Face cache, with their files (no network used)."""
    require_hub()
    from huggingface_hub import constants

    cache = Path(constants.HF_HUB_CACHE)
    # Importing the hub client's download code costs a new process about 0.12 s (httpx and more):
    # look for the repos' cache folders first, the hub's own layout, and import it only for those.
    candidates = [(preset, preset.gguf_repo, preset.gguf_file) for preset in PRESETS
                  if preset.gguf_repo and preset.gguf_file and (
                      cache / constants.REPO_ID_SEPARATOR.join(["models", *preset.gguf_repo.split("/")])).is_dir()]
    if not candidates:
        return []
    from huggingface_hub import try_to_load_from_cache

    found = []
    for preset, repo, file in candidates:
        path: Any = try_to_load_from_cache(repo, file)
        if isinstance(path, str) and Path(path).is_file():
            found.append((preset, Path(path)))
    return found


def best_pulled_preset() -> Preset | None:
    """The best Hammer model pulled here: the newest release, then the largest size. None when none is.

    Example:
        >>> best_pulled_preset() is None or best_pulled_preset().name.startswith("hammer")
        True
    """
    try:
        pulled = pulled_presets()
    except ImportError:  # huggingface_hub is not installed: nothing can have been pulled
        return None
    return max((p for p, _ in pulled), key=lambda p: (p.version, p.params_billions), default=None)
