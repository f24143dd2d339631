"""Constants and helpers shared by the server tests and their fixtures."""

from typing import Any

API_KEY = "sk-hammer-test"
MODEL = "hammer-test"
# Generous: the 2 shared cores also run other test suites, and requests queue on the server.
TIMEOUT = 300.0


def stream_then_kill(engine: Any, server: Any, messages: list[Any], after: int = 3) -> tuple[list[str], Any]:
    """Stream ``messages`` and kill ``server`` after ``after`` text pieces; the pieces seen and the error raised."""
    import pytest

    from hammer_plugins import TextDelta
    from hammer_plugins.values.errors import ServerStreamError

    seen: list[str] = []
    with pytest.raises(ServerStreamError) as caught:
        for event in engine.stream(messages, max_tokens=200):
            if isinstance(event, TextDelta):
                seen.append(event.text)
                if len(seen) == after:
                    server.kill()
    return seen, caught.value
