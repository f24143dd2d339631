"""Hammer models by name: the checkpoints people use, where their GGUF conversions live, and their licenses.

``model="hammer2.1-1.5b"`` (any entry point) picks a preset: the GGUF on llama.cpp (downloaded
once into the Hugging Face cache, ``hammer pull``), the Hugging Face checkpoint on transformers.
Hammer 2.0 and 1.0 presets select their own prompt layout. The GGUF repositories are community
conversions (the Hammer authors publish safetensors only); the ones listed are what public code
most often points at (as of late 2026). Sizes are approximate download sizes.

Example:
    >>> preset = find_preset("Hammer2.1-1.5B")
    >>> preset.gguf_repo, preset.gguf_file, preset.prompt_format, preset.license
    ('mradermacher/Hammer2.1-1.5b-GGUF', 'Hammer2.1-1.5b.Q4_K_M.gguf', 'hammer2.1', 'CC-BY-NC-4.0')
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class Preset:
    """One Hammer checkpoint by name: its Hugging Face checkpoint, a GGUF conversion, layout, license.

    Example:
        >>> find_preset("hammer2.0-7b").prompt_format
        'hammer2.0'
    """

    name: str
    hf_repo: str
    prompt_format: str
    license: str
    gguf_repo: str | None = None
    gguf_file: str | None = None
    gguf_bytes: int | None = None
    base: str = ""

    @property
    def version(self) -> tuple[int, int]:
        """(major, minor) of the Hammer release, for choosing the best local model."""
        major, minor = self.name.removeprefix("hammer").split("-")[0].split(".")
        return int(major), int(minor)

    @property
    def params_billions(self) -> float:
        return float(self.name.rsplit("-", 1)[1].rstrip("b"))

    @property
    def gguf_size(self) -> str:
        """The GGUF's approximate size in words (``"about 1.0 GB"``), or ``"unknown"``."""
        return f"about {self.gguf_bytes / 1e9:.1f} GB" if self.gguf_bytes else "unknown"


_NC = "CC-BY-NC-4.0"  # Hammer 2.1: non-commercial
PRESETS: tuple[Preset, ...] = (
    Preset("hammer2.1-0.5b", "MadeAgents/Hammer2.1-0.5b", "hammer2.1", _NC, "mradermacher/Hammer2.1-0.5b-GGUF",
           "Hammer2.1-0.5b.Q4_K_M.gguf", 398_000_000, "Qwen2.5-Coder-0.5B-Instruct"),
    Preset("hammer2.1-1.5b", "MadeAgents/Hammer2.1-1.5b", "hammer2.1", _NC, "mradermacher/Hammer2.1-1.5b-GGUF",
           "Hammer2.1-1.5b.Q4_K_M.gguf", 985_701_504, "Qwen2.5-Coder-1.5B-Instruct"),
    Preset("hammer2.1-3b", "MadeAgents/Hammer2.1-3b", "hammer2.1", _NC, "mradermacher/Hammer2.1-3b-GGUF",
           "Hammer2.1-3b.Q4_K_M.gguf", 1_930_000_000, "Qwen2.5-Coder-3B-Instruct"),
    Preset("hammer2.1-7b", "MadeAgents/Hammer2.1-7b", "hammer2.1", _NC, "mradermacher/Hammer2.1-7b-GGUF",
           "Hammer2.1-7b.Q4_K_M.gguf", 4_680_000_000, "Qwen2.5-Coder-7B-Instruct"),
    Preset("hammer2.0-0.5b", "MadeAgents/Hammer2.0-0.5b", "hammer2.0", "CC-BY-4.0",
           "Nekuromento/Hammer2.0-0.5b-Q8_0-GGUF", "hammer2.0-0.5b-q8_0.gguf", 531_000_000, "Qwen2-0.5B"),
    Preset("hammer2.0-1.5b", "MadeAgents/Hammer2.0-1.5b", "hammer2.0", "CC-BY-4.0",
           "Nekuromento/Hammer2.0-1.5b-Q8_0-GGUF", "hammer2.0-1.5b-q8_0.gguf", 1_650_000_000, "Qwen2-1.5B"),
    Preset("hammer2.0-7b", "MadeAgents/Hammer2.0-7b", "hammer2.0", "CC-BY-4.0", "neopolita/hammer2.0-7b-gguf",
           "hammer2.0-7b_q4_k_m.gguf", 4_680_000_000, "Qwen2-7B"),
    Preset("hammer1.0-1.5b", "MadeAgents/Hammer-1.5b", "hammer1.0", "CC-BY-4.0 (unverified)",
           "Nekuromento/Hammer-1.5b-Q8_0-GGUF", "hammer-1.5b-q8_0.gguf", 1_650_000_000),
    Preset("hammer1.0-7b", "MadeAgents/Hammer-7b", "hammer1.0", "CC-BY-4.0 (unverified)"),
)
"""The presets, best first within a release (the table in docs/models.md)."""


def find_preset(name: str) -> Preset | None:
    """The preset ``name`` names (case-insensitive; ``hammer-2.1-1.5b`` and ``Hammer2.1-1.5b`` too), or None."""
    key = name.strip().lower().replace("hammer-", "hammer", 1).replace("_", "-")
    return next((p for p in PRESETS if p.name == key), None)


def looks_like_a_preset(name: str) -> bool:
    """A bare name (no path, no repo owner) that starts like a Hammer model: meant as a preset."""
    return "/" not in name and "\\" not in name and not name.endswith(".gguf") and name.lower().startswith("hammer")


def closest_presets(name: str) -> list[str]:
    """Preset names close to a mistyped one (for the error message)."""
    return difflib.get_close_matches(name.lower(), [p.name for p in PRESETS], n=3, cutoff=0.5)
