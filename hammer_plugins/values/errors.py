"""Errors raised by hammer-plugins.

Every error names the thing that is wrong and how to fix it. Model *output* never raises: the
parser turns it into calls, a refusal, text, or invalid calls (see :mod:`hammer_plugins.output.parsing`).
"""

from __future__ import annotations


class HammerError(Exception):
    """Base class of every error this package raises on purpose.

    Example:
        >>> try:
        ...     raise UnknownToolError("tool_choice 'x' is not among the bound tools")
        ... except HammerError as exc:
        ...     print(type(exc).__name__)
        UnknownToolError
    """


class ModelNotFoundError(HammerError, FileNotFoundError):
    """A model file or directory that was asked for does not exist.

    Example:
        >>> from hammer_plugins.models.source import check_gguf
        >>> from pathlib import Path
        >>> try:
        ...     check_gguf(Path("missing.gguf"))
        ... except ModelNotFoundError as exc:
        ...     print("does not exist" in str(exc), isinstance(exc, FileNotFoundError))
        True True
    """


class InvalidModelFileError(HammerError, ValueError):
    """A file exists but is not a model the chosen backend can load (e.g. not a GGUF).

    Example:
        >>> issubclass(InvalidModelFileError, ValueError)
        True
    """


class ModelChecksumError(HammerError, ValueError):
    """The embedded default model assembled from its parts does not match its sha256.

    Example:
        >>> issubclass(ModelChecksumError, HammerError)
        True
    """


class BackendNotInstalledError(HammerError, ImportError):
    """The optional dependency of a backend is missing (the message names the extra to install).

    Example:
        >>> issubclass(BackendNotInstalledError, ImportError)
        True
    """


class RequestError(HammerError, ValueError):
    """A request the engine cannot run, with where it is wrong: ``loc`` is the place in the engine's request,
    such as ``("messages", 3, "tool_call_id")`` or ``("tools", 2)``; ``code`` the error code an API answers with,
    and ``rule`` the name of the rule broken (``"unanswered_result"``, ...; the code by default).

    Every door calls the same rules (:mod:`hammer_plugins.engine.rules`) and renames ``loc`` into its own
    API's field names (``input[5].call_id``, ``messages[2].content[0].tool_use_id``).

    Example:
        >>> err = RequestError("messages is empty. Fix: pass at least one user message", ("messages",), rule="empty")
        >>> err.loc, err.code, err.rule, isinstance(err, ValueError)
        (('messages',), 'invalid_value', 'empty', True)
    """

    default_loc: tuple[str | int, ...] = ()
    default_code = "invalid_value"

    def __init__(self, message: str, loc: tuple[str | int, ...] | None = None, code: str | None = None, *,
                 rule: str | None = None) -> None:
        super().__init__(message)
        self.loc = self.default_loc if loc is None else tuple(loc)
        self.code = self.default_code if code is None else code
        self.rule = rule or self.code


class SchemaConversionError(RequestError):
    """A tool schema uses a construct that cannot be rendered for Hammer.

    Attributes:
        tool: name of the tool (or ``"<unknown>"``).
        field: JSON path of the offending field inside the tool's parameters.
        loc: where in the request (``("tools", i)`` once the engine's rules place it; ``("response_format",)``
            for a response format's schema).

    Example:
        >>> from hammer_plugins import Tool
        >>> try:
        ...     Tool(name="f", parameters={"type": "object", "properties": {"x": {"type": "complex"}}})
        ... except SchemaConversionError as exc:
        ...     print(exc.tool, exc.field)
        f x.type
    """

    def __init__(self, tool: str, field: str, problem: str, fix: str = "") -> None:
        self.tool = tool
        self.field = field
        self.problem = problem
        message = f"tool {tool!r}, field {field!r}: {problem}"
        if fix:
            message += f". Fix: {fix}"
        super().__init__(message, ("tools",), "invalid_tool_schema")


class SchemaLimitError(SchemaConversionError):
    """A tool schema (or a ``response_format`` schema) is over one of the engine's budgets: its size
    once ``$ref`` is inlined, its nesting depth, an enum's size, the grammar's size or build time.

    Checked while the work is done, so an oversized request is refused before it costs much memory
    or time (see :class:`hammer_plugins.tools.limits.SchemaLimits`).

    Attributes:
        limit: the :class:`~hammer_plugins.tools.limits.SchemaLimits` field that was exceeded.
        value: how far the request went (at least; counting stops at the limit).
        maximum: the limit's value.

    Example:
        >>> err = SchemaLimitError("f", "x", "max_depth", 65, 64)
        >>> err.limit, isinstance(err, SchemaConversionError), "max_depth" in str(err)
        ('max_depth', True, True)
    """

    def __init__(self, tool: str, field: str, limit: str, value: float, maximum: float, what: str = "",
                 fix: str = "") -> None:
        self.limit = limit
        self.value = value
        self.maximum = maximum
        problem = f"{what or limit} is over the limit: {_number(value)} > {_number(maximum)} ({limit})"
        raise_it = (f"raise the limit: set HAMMER_LIMIT_{limit.upper()} in the environment, or "
                    f"engine.schema_limits = SchemaLimits({limit}=...)")
        super().__init__(tool, field, problem, f"{fix or 'simplify the schema'}; or {raise_it}")


def _number(value: float) -> str:
    """A count as a whole number, a time to the millisecond."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3f}"
    return str(int(value)) if isinstance(value, (int, float)) and abs(value) < 1e18 else str(value)


class UnknownModelError(ModelNotFoundError):
    """A model name that looks like a Hammer preset but is none (the message lists the known ones).

    Example:
        >>> from hammer_plugins.models.source import resolve_model
        >>> try:
        ...     resolve_model(model="hammer2.1-1.6b")
        ... except UnknownModelError as exc:
        ...     print("hammer2.1-1.5b" in str(exc))
        True
    """


class UnknownToolError(RequestError):
    """A forced ``tool_choice`` names a tool that is not among the bound tools (``loc`` ``("tool_choice",)``).

    Example:
        >>> from hammer_plugins import normalize_tool_choice
        >>> try:
        ...     normalize_tool_choice("get_time", ["get_weather"])
        ... except UnknownToolError as exc:
        ...     print("not among the bound tools" in str(exc), exc.loc)
        True ('tool_choice',)
    """

    default_loc = ("tool_choice",)
    default_code = "invalid_tool_choice"


class ToolBudgetError(HammerError, ValueError):
    """The tools that must be offered (pinned, named by ``tool_choice``, or already called) do not fit
    the tool budget on their own.

    Example:
        >>> from hammer_plugins.tools.selection import select_tools
        >>> try:
        ...     select_tools([900, 50], [0.0, 1.0], budget=500, keep=[0], names=["big_tool", "small"])
        ... except ToolBudgetError as exc:
        ...     print(str(exc)[:62])
        the tools that must be offered (big_tool) take 900 prompt toke
    """


class ContextWindowExceededError(HammerError, ValueError):
    """The rendered prompt plus the requested output does not fit in the model's context.

    Attributes:
        prompt_tokens: tokens of the rendered prompt.
        max_new_tokens: tokens reserved for the answer.
        context_window: the model's context size (``n_ctx``).

    Example:
        >>> error = ContextWindowExceededError(prompt_tokens=9000, max_new_tokens=512, context_window=8192)
        >>> error.prompt_tokens, "n_ctx" in str(error)
        (9000, True)
    """

    def __init__(self, prompt_tokens: int, max_new_tokens: int, context_window: int) -> None:
        self.prompt_tokens = prompt_tokens
        self.max_new_tokens = max_new_tokens
        self.context_window = context_window
        super().__init__(
            f"the prompt is {prompt_tokens} tokens and {max_new_tokens} more are reserved for the "
            f"answer, but the model's context window is {context_window} tokens. Fix: shorten the "
            "conversation or the tool list, lower max_tokens, or load the model with a larger "
            "n_ctx (e.g. n_ctx=8192)."
        )


class ServerError(HammerError):
    """Something went wrong talking to an inference server (base class of the server errors).

    Attributes:
        url: the server's base URL.
        status_code: the HTTP status, when there was one.

    Example:
        >>> ServerError("boom", url="http://127.0.0.1:8080/v1", status_code=500).status_code
        500
    """

    def __init__(self, message: str, *, url: str = "", status_code: int | None = None) -> None:
        self.url = url
        self.status_code = status_code
        super().__init__(message)


class ServerUnavailableError(ServerError, ConnectionError):
    """The server could not be reached, refused the connection, or kept answering 502/503/504.

    Example:
        >>> issubclass(ServerUnavailableError, ConnectionError)
        True
    """


class ServerTimeoutError(ServerError, TimeoutError):
    """No data arrived within ``timeout`` seconds. ``partial_text`` holds what had streamed by then.

    Example:
        >>> ServerTimeoutError("silent for 30 s", partial_text='[{"name"').partial_text
        '[{"name"'
    """

    def __init__(self, message: str, *, url: str = "", partial_text: str = "") -> None:
        self.partial_text = partial_text
        super().__init__(message, url=url)


class ServerHTTPError(ServerError):
    """The server answered with an HTTP error (``status_code``); ``detail`` is its message.

    Example:
        >>> ServerHTTPError("HTTP 400", status_code=400, detail="bad grammar").detail
        'bad grammar'
    """

    def __init__(self, message: str, *, url: str = "", status_code: int | None = None, detail: str = "") -> None:
        self.detail = detail
        super().__init__(message, url=url, status_code=status_code)


class ServerAuthenticationError(ServerHTTPError, PermissionError):
    """HTTP 401/403: the API key is missing or wrong.

    Example:
        >>> issubclass(ServerAuthenticationError, PermissionError)
        True
    """


class ServerModelNotFoundError(ServerError, LookupError):
    """The server does not serve the model asked for. ``available`` lists what it serves.

    Example:
        >>> ServerModelNotFoundError("no model 'x'", model="x", available=["hammer"]).available
        ['hammer']
    """

    def __init__(self, message: str, *, url: str = "", model: str | None = None, available: list[str] | None = None) -> None:
        self.model = model
        self.available = list(available or [])
        super().__init__(message, url=url)


class ServerStreamError(ServerError):
    """The stream ended before the answer finished. ``partial_text`` holds what had streamed.

    Example:
        >>> ServerStreamError("cut", partial_text="[").partial_text
        '['
    """

    def __init__(self, message: str, *, url: str = "", partial_text: str = "") -> None:
        self.partial_text = partial_text
        super().__init__(message, url=url)


class GrammarNotSupportedError(ServerError):
    """The server ignored or rejected the grammar under every protocol tried.

    Example:
        >>> issubclass(GrammarNotSupportedError, ServerError)
        True
    """


class GenerationCancelled(HammerError):
    """A generation stopped because its caller cancelled it (the ``cancel`` event of
    :meth:`~hammer_plugins.backends.base.Backend.stream`).

    The engine raises it only inside the worker thread of a cancelled async call, where nobody reads
    the answer: the awaiting task gets :class:`asyncio.CancelledError` as usual.

    Example:
        >>> import threading
        >>> from hammer_plugins import ScriptedBackend
        >>> from hammer_plugins.backends.base import GenerationSettings
        >>> cancel = threading.Event(); cancel.set()
        >>> try:
        ...     list(ScriptedBackend(["never read"]).stream("prompt", GenerationSettings(), cancel=cancel))
        ... except GenerationCancelled:
        ...     print("cancelled")
        cancelled
    """
