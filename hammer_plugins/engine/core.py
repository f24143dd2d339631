"""What the engine's parts read of the engine: an interface, so they import downwards only.

Planning, the turn rules and the drivers take the engine as an argument and read a few of its
settings, its backend and its tool binding; they type it as :class:`EngineCore`, not as
:class:`~hammer_plugins.HammerEngine` (which imports them), so no module of the package imports
the one above it, not even for a type. ``HammerEngine`` is the implementation; a test may pass
anything of this shape.

Example:
    >>> from hammer_plugins import HammerEngine, ScriptedBackend
    >>> engine: EngineCore = HammerEngine(backend=ScriptedBackend([]))
    >>> engine.backend.name, engine.on_refusal
    ('scripted', 'message')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from hammer_plugins.backends.base import BackendInterface, GenerationSettings
from hammer_plugins.engine.binding import ToolBinding
from hammer_plugins.engine.request import OnMissing, RefusalMode
from hammer_plugins.engine.tool_selection import ConversationOffers
from hammer_plugins.prompt.render import PromptFormat
from hammer_plugins.tools.limits import SchemaLimits
from hammer_plugins.tools.selector import ToolSelector


class EngineCore(Protocol):
    """The engine as its parts see it: the call defaults, the backend, and the tool binding.

    Example:
        >>> from hammer_plugins import HammerEngine, ScriptedBackend
        >>> isinstance(HammerEngine(backend=ScriptedBackend([])).settings, GenerationSettings)
        True
    """

    prompt_format: PromptFormat
    constrained: bool
    on_refusal: RefusalMode
    on_missing: OnMissing
    refusal_text: str
    settings: GenerationSettings
    schema_limits: SchemaLimits | None
    tool_budget: int
    tool_selector: ToolSelector
    offer_memory: ConversationOffers | None
    relevance_gate: bool
    max_tool_rounds: int | None

    @property
    def backend(self) -> BackendInterface: ...

    def bind(self, tools: Sequence[Any], mask_names: bool | None = None) -> ToolBinding: ...
