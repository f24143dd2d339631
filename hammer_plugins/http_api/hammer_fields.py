"""Hammer's own request fields, the same in every API: each door's request type inherits :class:`HammerFields`,
so the fields are declared, bounded and converted once.

A client sends them beside the API's own fields (the openai and anthropic SDKs' ``extra_body=...``; Ollama's
own Python client sends only Ollama's fields, so that door also reads ``pinned_tools`` from ``options``).
What a selection offered comes back in every API's answer as ``hammer_offered_tools``
(:meth:`~hammer_plugins.output.response.HammerResponse.offered_extension`).

Example:
    >>> fields = HammerFields(pinned_tools=["get_weather"], mask_names=True)
    >>> fields.hammer_options(on_refusal="answer")["pinned_tools"]
    ('get_weather',)
    >>> try:
    ...     HammerFields(pinned_tools=["x"] * 1000)
    ... except ValueError as exc:
    ...     print("at most 256" in str(exc))
    True
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StrictStr

MAX_PINNED_TOOLS = 256
"""Names one request may pin: each is looked up among the request's tools, and all of them must fit the tool
budget together."""

PinnedTools = Annotated[list[StrictStr] | None, Field(max_length=MAX_PINNED_TOOLS)]
"""``pinned_tools`` as a request may send it: tool names, at most :data:`MAX_PINNED_TOOLS`."""


class HammerFields(BaseModel):
    """Hammer's own request fields (every door's request type inherits them).

    ``mask_names``, ``constrained``: the engine's settings for this request. ``on_refusal``: what Hammer's ``[]``
    becomes (the refusal text, or a plain answer). ``on_missing``: the ask-or-call rule. ``pinned_tools``: names
    of the request's tools that stay offered when the server narrows a large tool set (``--tool-budget``); a
    name that is not among the tools is a 400 naming ``pinned_tools[i]``.
    """

    mask_names: bool | None = Field(None, strict=True)
    on_refusal: Literal["message", "answer"] | None = None
    on_missing: Literal["ask", "call"] | None = None  # the engine's ask-or-call rule for this request
    constrained: bool | None = Field(None, strict=True)
    pinned_tools: PinnedTools = None

    def hammer_options(self, *, on_refusal: Literal["message", "answer"] | None = None,
                       pinned_tools: list[str] | None = None) -> dict[str, Any]:
        """These fields as the engine request's keywords; ``on_refusal``: the door's default when the request sends
        none (agent clients show whatever comes back, so most doors answer Hammer's ``[]`` in prose);
        ``pinned_tools``: the names the door found elsewhere when the request sends none here."""
        return {"mask_names": self.mask_names, "constrained": self.constrained, "on_missing": self.on_missing,
                "on_refusal": self.on_refusal or on_refusal,
                "pinned_tools": tuple(self.pinned_tools or pinned_tools or ())}
