"""An API door of the server: its routes and how it differs at the edge, as one value (:class:`Door`).

A door is a folder (``chat_completions/``, ``responses/``, ``messages/``, ``ollama/``, ``playground/``) whose
``router.py`` builds a :class:`Door`; :mod:`~hammer_plugins.http_api.doors` lists them, and
:func:`~hammer_plugins.http_api.app.create_app` registers each. What a door declares here is all the shared
code learns of it: its error shape and the paths it takes, the paths it answers without the key, and the paths
whose bodies are read as JSON whatever their content type. Nothing shared imports a door
(``tests/unit/test_layout.py`` checks it).

Example:
    >>> from fastapi import APIRouter
    >>> door = Door("example", APIRouter(), prefixes=("/example/",), error_shape=lambda e: {"oops": e.message})
    >>> shapes = error_shapes([door])
    >>> shapes.body(APIError(400, "bad"), "/example/x"), "error" in shapes.body(APIError(400, "bad"), "/v1/x")
    ({'oops': 'bad'}, True)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fastapi import APIRouter

from hammer_plugins.http_api.errors import APIError, ErrorShape, ErrorShapes, openai_error_body

__all__ = ["APIError", "Door", "error_shapes"]


@dataclass(frozen=True)
class Door:
    """One API: ``router`` holds its routes; errors on paths under ``prefixes`` take ``error_shape`` (also those
    raised before routing: the key, the body's size, the guard); ``public_paths`` and ``public_prefixes`` are
    answered without the API key; POST bodies under ``lenient_json_prefixes`` are read as JSON whatever their
    content type when no browser sent them (no ``Origin``); paths under ``same_origin_prefixes`` are the door's
    own page's alone: a browser request from any other origin (another localhost port included) is refused,
    with no CORS grant."""

    name: str
    router: APIRouter
    prefixes: tuple[str, ...] = ()
    error_shape: ErrorShape = openai_error_body
    public_paths: tuple[str, ...] = ()
    public_prefixes: tuple[str, ...] = ()
    lenient_json_prefixes: tuple[str, ...] = ()
    same_origin_prefixes: tuple[str, ...] = ()


def error_shapes(doors: Iterable[Door]) -> ErrorShapes:
    """Which error shape each path takes, from the doors' prefixes."""
    return ErrorShapes([(prefix, door.error_shape) for door in doors for prefix in door.prefixes])
