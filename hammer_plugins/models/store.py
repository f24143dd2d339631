"""Hammer models on this machine: pull one by name, list what is there (``hammer pull``, ``hammer models``).

Downloads go through ``huggingface_hub`` into its cache (``$HF_HOME``, ``$HF_HUB_CACHE``), with its
progress bars, resume of interrupted downloads, tokens and revisions; nothing here re-implements
them. A pulled preset becomes the default model of every entry point that is given none
(:func:`hammer_plugins.models.source.best_pulled_preset`).

Example:
    >>> rows = model_table()
    >>> rows[0]["name"], rows[0]["license"]
    ('hammer2.1-0.5b', 'CC-BY-NC-4.0')
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hammer_plugins.models.presets import PRESETS
from hammer_plugins.models.source import ModelSource, cached_gguf, fetch_gguf, pulled_presets, require_hub, resolve_model


def describe_pull(source: ModelSource) -> str:
    """One line saying what a pull fetches: repo, file, approximate size, license.

    Example:
        >>> describe_pull(resolve_model(model="hammer2.1-1.5b"))
        'hammer2.1-1.5b: mradermacher/Hammer2.1-1.5b-GGUF/Hammer2.1-1.5b.Q4_K_M.gguf, about 1.0 GB, license CC-BY-NC-4.0'
    """
    what = f"{source.location}/{source.filename}" if source.filename else f"{source.location} ({source.quant})"
    if source.kind == "hub":
        what = f"{source.location} (a Hugging Face checkpoint)"
    size = source.preset.gguf_size if source.preset and source.kind == "hub_gguf" else _remote_size(source)
    license_ = source.preset.license if source.preset else "see the repo's model card"
    return f"{source.pull_name if source.kind == 'hub_gguf' else source.location}: {what}, {size}, license {license_}"


def _remote_size(source: ModelSource) -> str:
    """The file's size from the hub (a HEAD request); "size unknown" offline or for a checkpoint."""
    if source.kind != "hub_gguf" or not source.filename:
        return "size unknown"
    try:
        from huggingface_hub import get_hf_file_metadata, hf_hub_url

        size = get_hf_file_metadata(hf_hub_url(source.location, source.filename, revision=source.revision)).size
    except Exception:  # noqa: BLE001 - only an estimate for the user; the download reports its own errors
        return "size unknown"
    return f"about {size / 1e9:.1f} GB" if size else "size unknown"


def pull(name: str, *, checkpoint: bool = False, force: bool = False, revision: str | None = None) -> Path:
    """Download a model into the Hugging Face cache (once) and return its local path.

    ``name`` is a preset or a hub reference (:mod:`hammer_plugins.models.source`); ``checkpoint=True``
    fetches the Hugging Face checkpoint (for ``backend="transformers"``) instead of the GGUF.
    """
    source = resolve_model(model=name, gguf=not checkpoint, revision=revision)
    if source.kind == "hub_gguf":
        return fetch_gguf(source, force=force)
    if source.kind == "hub":
        require_hub()
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(source.location, revision=revision, force_download=force))
    return Path(source.location)  # a local file or directory: already here


def model_table() -> list[dict[str, Any]]:
    """Every preset, with where its GGUF comes from and whether (and where) it is downloaded here."""
    pulled = {preset.name: path for preset, path in pulled_presets()}
    rows = []
    for preset in PRESETS:
        path = pulled.get(preset.name)
        rows.append({
            "name": preset.name, "gguf": f"{preset.gguf_repo}/{preset.gguf_file}" if preset.gguf_repo else "-",
            "size": preset.gguf_size if preset.gguf_repo else "-", "license": preset.license,
            "checkpoint": preset.hf_repo, "prompt_format": preset.prompt_format,
            "downloaded": str(path) if path else "", "downloaded_bytes": path.stat().st_size if path else 0,
        })
    return rows


def default_model_line() -> str:
    """What a call without a model runs, in one line (the CLI prints it)."""
    source = resolve_model()
    if source.is_default:
        return ("note: no Hammer model given or pulled, so this runs the embedded stand-in, Qwen2.5-Coder-0.5B-Instruct "
                "(not Hammer: it calls a tool for some questions Hammer would refuse). For a real Hammer model: "
                "hammer pull hammer2.1-1.5b")
    if source.preset is not None:
        return f"model: {source.preset.name} (pulled; license {source.preset.license})"
    return f"model: {source.display_name}"


__all__ = ["cached_gguf", "default_model_line", "describe_pull", "model_table", "pull"]
