"""Errors on the wire: :class:`APIError`, the shapes API doors register for their paths (OpenAI's ``error``
object by default), the HTTP response that carries one, and the engine's errors as API errors.

Example:
    >>> APIError(400, "n must be 1", param="n").body()["error"]["type"]
    'invalid_request_error'
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, TypeVar

from fastapi.responses import JSONResponse
from pydantic import ValidationError

from hammer_plugins.tools.names import printable
from hammer_plugins.values.errors import (
    ContextWindowExceededError,
    GrammarNotSupportedError,
    HammerError,
    RequestError,
    SchemaConversionError,
    ServerAuthenticationError,
    ServerError,
    ServerHTTPError,
    ServerModelNotFoundError,
    ServerStreamError,
    ServerTimeoutError,
    ServerUnavailableError,
)


class APIError(Exception):
    """An error answered in its API's shape: OpenAI's ``{"error": {"message", "type", "param", "code"}}`` by
    default, each API door's own shape where it has one (:class:`ErrorShapes`).

    ``details`` holds what a door may word in its own way (a context overflow's token counts).

    Example:
        >>> APIError(400, "n must be 1", param="n").body()["error"]["type"]
        'invalid_request_error'
    """

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",  # noqa: A002
                 param: str | None = None, code: str | None = None, headers: dict[str, str] | None = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers  # e.g. Retry-After on a 429
        self.details = details or {}

    def body(self) -> dict[str, Any]:
        """The error in OpenAI's shape (the APIs without a shape of their own use it)."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


ErrorShape = Callable[[APIError], dict[str, Any]]
"""An API's error JSON for an :class:`APIError`."""


def openai_error_body(error: APIError) -> dict[str, Any]:
    """OpenAI's shape, the server's default."""
    return error.body()


class ErrorShapes:
    """Which error shape a path takes: each API door registers its paths' prefixes with its shape (an error
    raised before routing, by the guard or the key check, is shaped by path); OpenAI's elsewhere.

    Example:
        >>> shapes = ErrorShapes([("/api/", lambda e: {"error": e.message})])
        >>> shapes.body(APIError(404, "no such model"), "/api/chat"), shapes.body(APIError(404, "x"), "/v1/x")["error"]["code"]
        ({'error': 'no such model'}, None)
    """

    def __init__(self, prefixes: Sequence[tuple[str, ErrorShape]] = ()) -> None:
        # Longest prefix first, so a door under another's prefix wins.
        self.prefixes = sorted(prefixes, key=lambda item: len(item[0]), reverse=True)

    def shape(self, path: str) -> ErrorShape:
        return next((shape for prefix, shape in self.prefixes if path.startswith(prefix)), openai_error_body)

    def body(self, error: APIError, path: str) -> dict[str, Any]:
        return self.shape(path)(error)

    def response(self, error: APIError, path: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return error_response(error, self.shape(path), headers)


def error_response(error: APIError, shape: ErrorShape = openai_error_body,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    """``error`` as JSON in ``shape``, with its status and headers."""
    return JSONResponse(shape(error), status_code=error.status, headers={**(error.headers or {}), **(headers or {})})


def validation_error(exc: ValidationError) -> APIError:
    first = exc.errors()[0]
    param = ".".join(str(p) for p in first["loc"]) or None
    return APIError(400, f"Invalid value for '{param}': {first['msg']}.", param=param, code="invalid_value")


_P = ParamSpec("_P")
_R = TypeVar("_R")


def api_errors_only(parse: Callable[_P, _R]) -> Callable[_P, _R]:
    """``parse`` raising only :class:`APIError`: a body shaped in a way no check foresaw is still the client's
    error, a 400 in its API's shape with one log line (never a traceback, and the connection is kept).

    Example:
        >>> @api_errors_only
        ... def parse(body): return body["tool_choice"]["name"] + 1
        >>> try:
        ...     parse({"tool_choice": {"name": ["f"]}})
        ... except APIError as exc:
        ...     print(exc.status, exc.code)
        400 invalid_request
    """

    @functools.wraps(parse)
    def checked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return parse(*args, **kwargs)
        except APIError:
            raise
        except Exception as exc:  # noqa: BLE001 - see the docstring
            what = printable(f"{type(exc).__name__}: {exc}")[:300]
            logging.getLogger("hammer_plugins.http_api").info("unreadable request body (%s)", what)
            raise APIError(400, f"The request could not be read ({what}).", code="invalid_request") from None

    return checked


UPSTREAM_RETRY_AFTER_SECONDS = 5
"""The ``Retry-After`` of a 503 while the model server behind this API is down or restarting."""


def _upstream_error(exc: Exception) -> APIError | None:
    """The 5xx for a failure of the model server behind this API, or None when ``exc`` is no such failure.

    Its message names no internal address (the exception's, with the URL, goes to this server's log,
    once); 4xx only where the request itself is at fault (the upstream refused its content).
    """
    if not isinstance(exc, ServerError):
        return None
    if not getattr(exc, "_hammer_logged", False):
        logging.getLogger("hammer_plugins.http_api").error("the model server failed a request: %s", exc)
        try:
            exc._hammer_logged = True  # type: ignore[attr-defined]  # app.py may map the same one twice
        except AttributeError:
            pass
    operator = "if it persists, this server's operator should read its log"
    status = exc.status_code or 0
    if isinstance(exc, ServerTimeoutError):
        return APIError(504, "The model server behind this API sent nothing in time, so the request was given up. "
                             f"Fix: retry later, or with a shorter conversation or a lower max_tokens; {operator}.",
                        type="server_error", code="upstream_timeout")
    if isinstance(exc, ServerStreamError):
        return APIError(502, "The model server behind this API broke off the answer (it may have crashed; a model "
                             f"server this API started is restarted). Fix: retry the request; {operator}.",
                        type="server_error", code="upstream_connection_lost")
    if isinstance(exc, ServerAuthenticationError):
        return APIError(502, "The model server behind this API refused this API's credentials: a configuration "
                             "error of this server, not of your request. Fix: the operator sets "
                             "$HAMMER_UPSTREAM_API_KEY to the model server's key.",
                        type="server_error", code="upstream_auth_failed")
    if isinstance(exc, ServerUnavailableError) or status == 429:
        return APIError(503, "The model server behind this API is not available right now (starting, restarting "
                             f"or overloaded). Fix: retry in a few seconds; {operator}.", type="server_error",
                        code="upstream_unavailable", headers={"Retry-After": str(UPSTREAM_RETRY_AFTER_SECONDS)})
    if isinstance(exc, (ServerModelNotFoundError, GrammarNotSupportedError)) or status == 404:
        return APIError(502, f"The model server behind this API is misconfigured ({type(exc).__name__}). Fix: "
                             "this server's operator should read its log.", type="server_error",
                        code="upstream_misconfigured")
    if isinstance(exc, ServerHTTPError) and 400 <= status < 500:
        return APIError(400, f"The model server behind this API refused the request (HTTP {status}: "
                             f"{exc.detail[:500]}).", code="upstream_rejected")
    return APIError(502, f"The model server behind this API failed on the request{f' (HTTP {status})' if status else ''}"
                         f". Fix: retry; {operator}.", type="server_error", code="upstream_error")


def _dotted(loc: tuple[str | int, ...]) -> str | None:
    """An engine request's place as a path (``messages[3].tool_call_id``), for an API that names it so."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else part
    return path or None


def request_error(exc: RequestError, param: str | None, message: str | None = None) -> APIError:
    """A broken request rule (:mod:`hammer_plugins.engine.rules`) as a 400 naming the API's field ``param``."""
    text = message or (f"Invalid tool schema: {exc}" if isinstance(exc, SchemaConversionError) else str(exc))
    return APIError(400, text, param=param, code=exc.code)


def engine_error(exc: Exception, param: Callable[[tuple[str | int, ...]], str | None] | None = None) -> APIError:
    """The HTTP error for an exception the engine raised on a request (500 for the unexpected).

    The client's own mistakes are 4xx; a failure of the model server behind this API (down, restarting,
    refusing this API's key, answering 5xx, too slow) is 502, 503 (with ``Retry-After``) or 504 with
    ``type: "server_error"``, and names no internal address. A broken request rule names the field at its
    ``loc``, in the API's words when the door gives ``param`` (an engine place to the API's field name).

    Example:
        >>> from hammer_plugins.values.errors import ServerUnavailableError
        >>> error = engine_error(ServerUnavailableError("could not connect to http://127.0.0.1:9/v1"))
        >>> error.status, error.type, "127.0.0.1" in error.message, error.headers
        (503, 'server_error', False, {'Retry-After': '5'})
    """
    if isinstance(exc, APIError):
        return exc
    upstream = _upstream_error(exc)
    if upstream is not None:
        return upstream
    if isinstance(exc, ContextWindowExceededError):
        return APIError(400, f"This model's maximum context length is {exc.context_window} tokens. However, your "
                             f"messages resulted in {exc.prompt_tokens} tokens and {exc.max_new_tokens} more are "
                             "reserved for the completion. Please reduce the length of the messages or tools, or "
                             "max_tokens.", param="messages", code="context_length_exceeded",
                        details={"prompt_tokens": exc.prompt_tokens, "context_window": exc.context_window})
    if isinstance(exc, RequestError):
        return request_error(exc, param(exc.loc) if param is not None else _dotted(exc.loc))
    if isinstance(exc, (HammerError, ValueError)):
        return APIError(400, str(exc), code="invalid_request")
    return APIError(500, f"The server failed to answer the request ({type(exc).__name__}); see the server's log.",
                    type="server_error", code="internal_error")
