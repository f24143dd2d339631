"""The API doors the server registers, one line each: adding an API is a folder and a line here.

Each entry builds its door (:class:`~hammer_plugins.http_api.door.Door`) from the server's settings; this is
the one shared module that imports doors.

Example:
    >>> [make.__module__.rsplit(".", 2)[-2] for make in DOORS]
    ['chat_completions', 'responses', 'messages', 'ollama', 'playground']
"""

from __future__ import annotations

from collections.abc import Callable

from hammer_plugins.http_api.chat_completions.router import chat_completions_door
from hammer_plugins.http_api.context import ServerSettings
from hammer_plugins.http_api.door import Door
from hammer_plugins.http_api.messages.router import messages_door
from hammer_plugins.http_api.ollama.router import ollama_door
from hammer_plugins.http_api.playground.router import playground_door
from hammer_plugins.http_api.responses.router import responses_door

DOORS: tuple[Callable[[ServerSettings], Door], ...] = (
    chat_completions_door,
    responses_door,
    messages_door,
    ollama_door,
    playground_door,
)
