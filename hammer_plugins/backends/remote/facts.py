"""What the server backend has learned about its server, in one object that the backend owns and hands to the
components that read or set it (:class:`~.discovery.ServerDiscovery`, :class:`~.token_counting.ServerTokenCounter`,
:class:`~.grammar_probe.ServerGrammarProbe`).

Example:
    >>> from hammer_plugins.backends.remote.settings import ServerBackendSettings
    >>> facts = ServerFacts.from_settings(ServerBackendSettings(base_url="http://127.0.0.1:8080", context_window=2048))
    >>> facts.window, facts.window_source, facts.dialect.kind, facts.loaded
    (2048, 'setting', 'auto', False)
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from hammer_plugins.backends.remote.dialects import ServerDialect, dialect_for
from hammer_plugins.backends.remote.settings import GrammarProtocol, ServerBackendSettings


@dataclass
class ServerFacts:
    """The server's model name, kind (its dialect), context window and where that came from, tokenize path, grammar
    protocol and whether discovery has run; ``lock`` serializes the slow one-off steps that learn them
    (discovery and the grammar probe).

    Example:
        >>> from hammer_plugins.backends.remote.settings import ServerBackendSettings
        >>> facts = ServerFacts.from_settings(ServerBackendSettings(base_url="http://127.0.0.1:8080"))
        >>> facts.learn_window(4096)
        >>> facts.window, facts.window_source
        (4096, 'learned')
    """

    model: str | None
    dialect: ServerDialect
    window: int | None
    window_source: str
    protocol: GrammarProtocol | None
    tokenize_path: str | None = None
    loaded: bool = False
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    @classmethod
    def from_settings(cls, settings: ServerBackendSettings) -> ServerFacts:
        """What is known before the server is contacted: what the settings say."""
        return cls(
            model=settings.model, dialect=dialect_for(settings.server_kind), window=settings.context_window,
            window_source="setting" if settings.context_window else "unknown",
            protocol=(settings.grammar_protocol if settings.grammar_protocol == "none"
                      or (settings.grammar_protocol != "auto" and not settings.verify_grammar) else None))

    def learn_window(self, window: int) -> None:
        """The window a server's error named; never overrides a window set in the settings."""
        if window > 0 and self.window_source != "setting":
            self.window, self.window_source = window, "learned"

    def adopt(self, other: ServerFacts, settings: ServerBackendSettings) -> None:
        """Take what ``other`` learned about the same server, where ``settings`` (these facts' own) leave it open."""
        with other.lock:
            self.loaded, self.model, self.dialect = other.loaded, other.model, other.dialect
            self.tokenize_path = other.tokenize_path
            if settings.context_window is None:
                self.window, self.window_source = other.window, other.window_source
            if settings.grammar_protocol in ("auto", other.protocol):
                self.protocol = self.protocol or other.protocol
