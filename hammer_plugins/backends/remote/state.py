"""What the parts of the server backend share: the state :class:`OpenAICompatibleBackend` holds and the
operations each part calls on another, declared once for the type checker.

Example:
    >>> from hammer_plugins.backends.remote import OpenAICompatibleBackend
    >>> issubclass(OpenAICompatibleBackend, ServerState)
    True
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from hammer_plugins.backends.remote.connection import ServerConnection
from hammer_plugins.backends.remote.dialects import ServerDialect
from hammer_plugins.backends.remote.settings import GrammarProtocol, ServerBackendSettings, ServerStats
from hammer_plugins.support.sized_cache import SizedCache

if TYPE_CHECKING:
    from hammer_plugins.backends.base import GenerationSettings
    from hammer_plugins.backends.remote.sansio import _Core


class ServerState:
    """The server backend's state (set by ``OpenAICompatibleBackend.__init__``), for its parts:
    :class:`~.discovery.ServerDiscovery`, :class:`~.token_counting.ServerTokenCounting`,
    :class:`~.grammar_probe.ServerGrammarProbe`.

    Example:
        >>> sorted(ServerState.__annotations__)[:2]
        ['_connection', '_dialect']
    """

    settings: ServerBackendSettings
    stats: ServerStats
    _connection: ServerConnection
    _setup_lock: threading.RLock
    _loaded: bool
    _model: str | None
    _dialect: ServerDialect
    _window: int | None
    _window_source: str
    _protocol: GrammarProtocol | None
    _tokenize_path: str | None
    _token_cache: SizedCache[str, int]

    if TYPE_CHECKING:
        @property
        def base_url(self) -> str: ...
        def load(self) -> None: ...
        async def aload(self) -> None: ...
        def _count_tokens(self, text: str) -> _Core[int]: ...
        def _completion_body(self, prompt: str, settings: GenerationSettings,
                             grammar_fields: dict[str, Any]) -> dict[str, Any]: ...
        def _completion(self, body: dict[str, Any], prompt: str, settings: GenerationSettings) -> _Core[None]: ...
