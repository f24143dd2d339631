"""How long one call took, in seconds; and the old ``timings["key"]`` reads, kept working.

Until November 2026 ``HammerResponse.timings`` was a ``dict[str, float]`` that also carried token counts and
flags. They are typed fields now: counts in :class:`~hammer_plugins.output.usage.Usage`
(``cached_prompt_tokens``, ``disk_cached_prompt_tokens``), what the decoder did in
:class:`~hammer_plugins.output.decoding.Decoding`. ``response.timings["time_to_first_token"]``,
``.get(key)`` and ``key in response.timings`` still read every old key (:data:`LEGACY_KEYS`), the old way.

Example:
    >>> from hammer_plugins.output.timings import Timings
    >>> Timings(time_to_first_token=0.25, total=1.5).total
    1.5
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr

from hammer_plugins.output.decoding import Decoding
from hammer_plugins.output.usage import Usage

SECONDS = ("time_to_first_token", "total", "engine_total", "parse")
"""The fields of :class:`Timings`."""

LEGACY_KEYS: dict[str, tuple[str, str]] = {
    "cached_prompt_tokens": ("usage", "cached_prompt_tokens"),
    "prompt_cached_tokens": ("usage", "cached_prompt_tokens"),  # the remote backend's old name
    "prompt_evaluated_tokens": ("usage", "evaluated_prompt_tokens"),
    "disk_cached_prompt_tokens": ("usage", "disk_cached_prompt_tokens"),
    "loop_guard_cuts": ("decoding", "loop_guard_cuts"),
    "loop_guard_stop": ("decoding", "loop_guard_stopped"),
    "length_stop": ("decoding", "length_stopped"),
    "relevance_gate": ("decoding", "relevance_gated"),
    "forced_tokens": ("decoding", "forced_tokens"),
    "drafted_tokens": ("decoding", "drafted_tokens"),
}
"""The old ``timings`` keys that are typed fields elsewhere now: key -> (``usage`` or ``decoding``, field)."""


class Timings(BaseModel):
    """Seconds spent on one call; ``None`` where it was not measured.

    ``time_to_first_token`` and ``total`` are the runtime's (from the request to its first and last
    token); ``engine_total`` is the whole engine call; ``parse`` reading the model's output.
    Indexing with an old key (``timings["loop_guard_stop"]``) reads the typed field it became, as a float.

    Example:
        >>> from hammer_plugins import HammerResponse, Usage
        >>> response = HammerResponse(kind="text", usage=Usage(prompt_tokens=9, cached_prompt_tokens=6),
        ...                           timings=Timings(time_to_first_token=0.5))
        >>> response.timings.time_to_first_token, response.timings["cached_prompt_tokens"]
        (0.5, 6.0)
        >>> "engine_total" in response.timings, response.timings.get("loop_guard_stop", 0.0)
        (False, 0.0)
    """

    model_config = ConfigDict(extra="forbid")

    time_to_first_token: float | None = None
    total: float | None = None
    engine_total: float | None = None
    parse: float | None = None

    _usage: Usage | None = PrivateAttr(default=None)
    _decoding: Decoding | None = PrivateAttr(default=None)

    def linked(self, usage: Usage, decoding: Decoding) -> Timings:
        """A copy that reads the old keys from ``usage`` and ``decoding`` (what a response does)."""
        copy = self.model_copy()
        copy._usage, copy._decoding = usage, decoding
        return copy

    def legacy(self) -> dict[str, float]:
        """The old ``dict[str, float]``: seconds measured, counts and flags set (a flag as ``1.0``)."""
        out = {k: float(v) for k in SECONDS if (v := getattr(self, k)) is not None}
        owners = {"usage": self._usage, "decoding": self._decoding}
        for key, (owner, name) in LEGACY_KEYS.items():
            value = getattr(owners[owner], name, None)
            if value is not None and value is not False:
                out[key] = float(value)
        return out

    def __eq__(self, other: object) -> bool:
        """Equal seconds (the link to a response's usage and decoding is not part of the value)."""
        return isinstance(other, Timings) and self.model_dump() == other.model_dump()

    def __getitem__(self, key: str) -> float:
        return self.legacy()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.legacy()

    def get(self, key: str, default: Any = None) -> Any:
        return self.legacy().get(key, default)

    @staticmethod
    def split_legacy(old: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """An old timings dict as (timings, usage, decoding) fields, for building a response from one."""
        parts: dict[str, dict[str, Any]] = {"timings": {}, "usage": {}, "decoding": {}}
        for key, value in old.items():
            owner, name = LEGACY_KEYS.get(key, ("timings", key))
            if key == "prompt_evaluated_tokens":
                continue  # derived: prompt_tokens - cached_prompt_tokens
            flag = owner == "decoding" and isinstance(getattr(Decoding(), name), bool)
            parts[owner][name] = bool(value) if flag else int(value) if owner != "timings" else value
        return parts["timings"], parts["usage"], parts["decoding"]
