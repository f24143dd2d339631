"""The error shapes of the APIs: :class:`APIError` (OpenAI's ``error`` object, Anthropic's under
``/v1/messages``, Ollama's under ``/api/``), the HTTP response that carries one, and the engine's errors as
API errors.

Example:
    >>> APIError(400, "n must be 1", param="n").body()["error"]["type"]
    'invalid_request_error'
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from fastapi.responses import JSONResponse
from pydantic import ValidationError

from hammer_plugins.tools.names import printable
from hammer_plugins.values.errors import (
    ContextWindowExceededError,
    GrammarNotSupportedError,
    HammerError,
    SchemaConversionError,
    ServerAuthenticationError,
    ServerError,
    ServerHTTPError,
    ServerModelNotFoundError,
    ServerStreamError,
    ServerTimeoutError,
    ServerUnavailableError,
    UnknownToolError,
)


class APIError(Exception):
    """An error answered in its API's shape: OpenAI's ``{"error": {"message", "type", "param", "code"}}``,
    or Anthropic's under ``/v1/messages``.

    Example:
        >>> APIError(400, "n must be 1", param="n").body()["error"]["type"]
        'invalid_request_error'
    """

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",  # noqa: A002
                 param: str | None = None, code: str | None = None, headers: dict[str, str] | None = None,
                 anthropic_message: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers  # e.g. Retry-After on a 429
        self.anthropic_message = anthropic_message  # where Anthropic's API words the case differently

    def body(self, path: str = "") -> dict[str, Any]:
        """The error JSON in the shape of the API ``path`` belongs to: Anthropic's under ``/v1/messages``
        (``{"type": "error", "error": {"type", "message"}}``), Ollama's under ``/api/`` (``{"error": "..."}``),
        OpenAI's elsewhere."""
        if path.startswith(OLLAMA_PATH):
            return {"error": self.message}
        if path.startswith(MESSAGES_PATH):
            message = self.anthropic_message or self.message
            return {"type": "error", "error": {"type": self.anthropic_type(), "message": message}}
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def anthropic_type(self) -> str:
        """Anthropic's error ``type`` for this status (``api_error`` for the 5xx it has no name for)."""
        return ANTHROPIC_ERROR_TYPES.get(self.status, "invalid_request_error" if self.status < 500 else "api_error")


MESSAGES_PATH = "/v1/messages"
"""Routes under this path are Anthropic's Messages API: their errors take Anthropic's shape."""

OLLAMA_PATH = "/api/"
"""Routes under this path are Ollama's native API: their errors are Ollama's ``{"error": "message"}``."""


ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                         503: "overloaded_error", 504: "timeout_error"}


def anthropic_error_body(error: APIError) -> dict[str, Any]:
    """``error`` in Anthropic's shape; a context overflow in Anthropic's own words.

    Example:
        >>> anthropic_error_body(APIError(401, "Missing API key."))
        {'type': 'error', 'error': {'type': 'authentication_error', 'message': 'Missing API key.'}}
    """
    return error.body(MESSAGES_PATH)


def error_response(error: APIError, headers: dict[str, str] | None = None, path: str = "") -> JSONResponse:
    """``error`` as JSON in the shape of the API ``path`` belongs to (OpenAI's, or Anthropic's under /v1/messages)."""
    return JSONResponse(error.body(path), status_code=error.status, headers={**(error.headers or {}), **(headers or {})})


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
            logging.getLogger("hammer_plugins.openai_server").info("unreadable request body (%s)", what)
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
        logging.getLogger("hammer_plugins.openai_server").error("the model server failed a request: %s", exc)
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


def engine_error(exc: Exception) -> APIError:
    """The HTTP error for an exception the engine raised on a request (500 for the unexpected).

    The client's own mistakes are 4xx; a failure of the model server behind this API (down, restarting,
    refusing this API's key, answering 5xx, too slow) is 502, 503 (with ``Retry-After``) or 504 with
    ``type: "server_error"``, and names no internal address.

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
        # Anthropic's clients read its own words for this case (Claude Code compacts on them).
        return APIError(400, f"This model's maximum context length is {exc.context_window} tokens. However, your "
                             f"messages resulted in {exc.prompt_tokens} tokens and {exc.max_new_tokens} more are "
                             "reserved for the completion. Please reduce the length of the messages or tools, or "
                             "max_tokens.", param="messages", code="context_length_exceeded",
                        anthropic_message=f"prompt is too long: {exc.prompt_tokens} tokens > {exc.context_window} maximum")
    if isinstance(exc, UnknownToolError):
        return APIError(400, str(exc), param="tool_choice", code="invalid_tool_choice")
    if isinstance(exc, SchemaConversionError):
        return APIError(400, f"Invalid tool schema: {exc}", param="tools", code="invalid_tool_schema")
    if isinstance(exc, (HammerError, ValueError, TypeError)):
        return APIError(400, str(exc), code="invalid_request")
    return APIError(500, f"The server failed to answer the request ({type(exc).__name__}); see the server's log.",
                    type="server_error", code="internal_error")
