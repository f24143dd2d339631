"""MCP servers' tools for the engine and the ``hammer`` command, framework-free.

An MCP server (Model Context Protocol) started as a command (stdio transport) lists its tools with
JSON Schemas; :class:`MCPServer` turns them into :class:`~hammer_plugins.tools.definition.Tool` s (``$ref`` is
inlined against ``$defs``, ``Optional`` collapsed, defaults kept: :func:`~hammer_plugins.tools.json_schema.normalize_parameters`)
and calls them through the server. It needs the ``mcp`` SDK (``pip install "hammer-plugins[mcp]"``),
imported only when a server starts. The server runs on an event loop in a background thread, so the
API is synchronous and works inside and outside ``asyncio``.

What a server gets and how long it may take:

* **Environment.** A server is a third-party program: it gets the MCP SDK's safe default environment
  (``mcp.client.stdio.get_default_environment()``: ``HOME``, ``PATH``, ``USER``, ``SHELL``, ``TERM``,
  ``LOGNAME`` on POSIX), not this process's, so API keys and cloud secrets stay here. Name what it
  needs: ``pass_env=["GITHUB_TOKEN"]`` (copied from this environment) or ``env={"NAME": "value"}``.
* **Timeouts.** A call that has not answered after ``timeout`` seconds is cancelled and the server is
  restarted (its state is lost), so a hung tool never holds up the calls after it; the call raises
  :class:`MCPTimeoutError`.

In LangChain and LlamaIndex, use their own MCP clients (``langchain-mcp-adapters``,
``llama-index-tools-mcp``): their tools bind to ``ChatHammer`` and ``HammerLLM`` as they come, and
both adapters give the model an MCP result's text (:func:`tool_result_text`), not its Python repr.

Example (needs ``pip install mcp-server-time``)::

    from hammer_plugins import HammerEngine, Message
    from hammer_plugins.mcp.client import MCPServer

    with MCPServer("python -m mcp_server_time --local-timezone UTC") as server:
        reply = HammerEngine().generate([Message.user("What time is it in Tokyo?")], tools=server.tools)
        for call in reply.tool_calls:
            print(server.call(call.name, call.arguments))

On the command line: ``hammer call "..." --mcp "python -m mcp_server_time"`` (the schemas only) and
``hammer chat --mcp "..."`` (runs the calls through the server, asking first).
"""

from __future__ import annotations

import ast
import atexit
import concurrent.futures
import contextlib
import json
import os
import re
import shlex
import shutil
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from hammer_plugins.launch.child import guarded_command
from hammer_plugins.tools.definition import Tool, to_tools
from hammer_plugins.tools.names import printable
from hammer_plugins.values.errors import HammerError

_INSTALL_HINT = 'the MCP client needs the mcp SDK. Fix: pip install "hammer-plugins[mcp]" (or pip install mcp)'


class MCPToolError(HammerError):
    """A tool call the MCP server answered with ``isError`` (its text is the message)."""


class MCPTimeoutError(MCPToolError):
    """A tool call that did not answer in time: it was cancelled and its server restarted."""


def mcp_tool_to_tool(tool: Any) -> Tool:
    """An MCP tool (``mcp.types.Tool`` or its dict: ``name``, ``description``, ``inputSchema``) as a :class:`Tool`.

    Example:
        >>> from hammer_plugins.prompt.tools_block import hammer_entry
        >>> hammer_entry(mcp_tool_to_tool({"name": "get_current_time", "description": "Get current time",
        ...     "inputSchema": {"type": "object", "properties": {"timezone": {"type": "string"}},
        ...                     "required": ["timezone"]}}))["parameters"]
        {'timezone': {'type': 'string', 'required': True}}
    """
    data = tool if isinstance(tool, Mapping) else tool.model_dump()
    schema = dict(data.get("inputSchema") or data.get("input_schema") or {"type": "object", "properties": {}})
    schema.pop("title", None)
    return Tool(name=str(data["name"]), description=str(data.get("description") or ""), parameters=schema)


def result_text(result: Any) -> str:
    """The text of an MCP ``CallToolResult``: its text blocks joined, else its structured content as JSON."""
    texts = [getattr(block, "text", None) for block in getattr(result, "content", None) or []]
    joined = "\n".join(t for t in texts if t)
    if joined:
        return joined
    structured = getattr(result, "structuredContent", None)
    return json.dumps(structured, ensure_ascii=False, default=str) if structured is not None else ""


# str(CallToolResult), as pydantic prints it: "meta=None content=[TextContent(type='text', text='...',
# annotations=None, meta=None)] structuredContent=None isError=False" (meta and structuredContent are
# missing in older SDKs). Split with str methods, not one regex: its three ".*" made crafted results of
# 18 kB take 14.5 s. The text fields' regex is linear: its alternatives start with different
# characters, and each field ends at the first unescaped quote.
_TEXT_FIELD = re.compile(r"TextContent\(type='text', text=(?P<text>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")
# The escapes a printed str (its repr) can hold: a text field with any other backslash pair was not printed by Python,
# and ast.literal_eval would only warn about it (a DeprecationWarning per field; a SyntaxWarning from Python 3.12).
_ESCAPE_PAIR = re.compile(r"\\(.)", re.S)
_REPR_ESCAPES = frozenset("\\'\"abfnrtvxuUN01234567\n")
_ERROR_FLAGS = {" isError=True": True, " isError=False": False}
_STRUCTURED = "] structuredContent="


def _split_result_str(value: str) -> tuple[str, str | None, bool] | None:
    """``(content, structured, is_error)`` of a printed ``CallToolResult``, in one pass: what the pattern
    ``(?:meta=.*? )?content=\\[(.*)\\](?: structuredContent=(.*))? isError=(True|False)`` matches."""
    suffix = next((s for s in _ERROR_FLAGS if value.endswith(s)), None)
    if suffix is None:
        return None
    value, is_error = value[: -len(suffix)], _ERROR_FLAGS[suffix]
    if value.startswith("meta="):
        start = value.find(" content=[", len("meta="))  # the first: the shortest meta, as ".*?" takes
        if start < 0:
            return None
        value = value[start + 1:]
    if not value.startswith("content=["):
        return None
    rest = value[len("content=["):]
    if rest.endswith("]"):  # the longest content, as ".*" takes: structuredContent absent
        return rest[:-1], None, is_error
    cut = rest.rfind(_STRUCTURED)
    if cut < 0:
        return None
    return rest[:cut], rest[cut + len(_STRUCTURED):], is_error


def tool_result_text(value: Any) -> tuple[str, bool] | None:
    """An MCP tool result as the model should read it: ``(text, is_error)``, or ``None`` when it is not one.

    ``value`` is a ``CallToolResult`` (duck-typed: ``content`` and ``isError``) or its ``str``, which
    is what ``llama-index-tools-mcp``'s tools hand an agent (``meta=None content=[TextContent(...)]``).
    The text is the result's text blocks joined, else its ``structuredContent`` as JSON. Used by both
    adapters where they turn a tool message into the prompt.

    Example:
        >>> tool_result_text("meta=None content=[TextContent(type='text', text='08:30', annotations=None, "
        ...                  "meta=None)] structuredContent={'time': '08:30'} isError=False")
        ('08:30', False)
        >>> tool_result_text("content=[] structuredContent={'ok': True} isError=True")
        ('{"ok": true}', True)
        >>> tool_result_text("08:30") is None
        True
    """
    if not isinstance(value, str):
        if hasattr(value, "content") and hasattr(value, "isError"):
            return result_text(value), bool(value.isError)
        return None
    parts = _split_result_str(value.strip())
    if parts is None:
        return None
    content, structured, is_error = parts
    texts: list[str] = []
    for found in _TEXT_FIELD.finditer(content):
        if any(pair[1] not in _REPR_ESCAPES for pair in _ESCAPE_PAIR.finditer(found["text"])):
            return None
        try:
            texts.append(str(ast.literal_eval(found["text"])))
        except (ValueError, SyntaxError):
            return None
    text = "\n".join(t for t in texts if t)
    if not text and structured and structured != "None":
        try:
            text = json.dumps(ast.literal_eval(structured), ensure_ascii=False, default=str)
        except (ValueError, SyntaxError):
            text = structured
    return text, is_error


def server_environment(pass_env: Iterable[str] = (), env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What an MCP server's process gets: the SDK's safe default, the named variables, then ``env``.

    Raises :class:`HammerError` for a name in ``pass_env`` that is not set here.
    """
    try:
        from mcp.client.stdio import get_default_environment
    except ImportError as exc:
        raise HammerError(_INSTALL_HINT) from exc
    out = dict(get_default_environment())
    for name in pass_env:
        if name not in os.environ:
            raise HammerError(f"the variable {name!r} to pass to the MCP server is not set here. Fix: export it, "
                              f"or give its value as {name}=VALUE")
        out[name] = os.environ[name]
    out.update({str(k): str(v) for k, v in (env or {}).items()})
    return out


def parse_env_options(options: Iterable[str]) -> tuple[list[str], dict[str, str]]:
    """``--mcp-env`` values: ``NAME`` (passed from this environment) or ``NAME=VALUE``.

    Example:
        >>> parse_env_options(["GITHUB_TOKEN", "LOG_LEVEL=debug"])
        (['GITHUB_TOKEN'], {'LOG_LEVEL': 'debug'})
    """
    names: list[str] = []
    values: dict[str, str] = {}
    for option in options:
        name, sep, value = option.partition("=")
        if not name or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"--mcp-env {option!r} is not NAME or NAME=VALUE. Fix: e.g. --mcp-env GITHUB_TOKEN")
        if sep:
            values[name] = value
        else:
            names.append(name)
    return names, values


_STDERR_LINE = 8192  # characters a relayed line holds: a server writing without newlines costs bounded memory


def _printable_stderr(label: str) -> Any:
    """The write end of a pipe for a server's stderr; a thread relays its lines to this process's stderr,
    made printable: an escape sequence a server writes (in a log line, or its tool's name in a warning)
    is shown, not run by the terminal."""
    read_fd, write_fd = os.pipe()

    def relay() -> None:
        with open(read_fd, "rb") as pipe:
            while line := pipe.readline(_STDERR_LINE):
                text = line.decode("utf-8", "replace").rstrip("\r\n")
                with contextlib.suppress(OSError, ValueError):  # this process's stderr closed: drop the line
                    sys.stderr.write(printable(text, keep_newlines=True) + "\n")
                    sys.stderr.flush()

    threading.Thread(target=relay, name=f"hammer-mcp-stderr {label}"[:60], daemon=True).start()
    return open(write_fd, "w")  # noqa: SIM115 - closed by MCPServer.close


class MCPServer:
    """One MCP server run as a subprocess over stdio: its tools, and calls to them.

    Args:
        command: the command line (a string, split as a shell would) or an argv list.
        env: variables set for the server, on top of the SDK's safe default environment (not this
            process's environment: secrets stay here unless named).
        pass_env: names of variables copied from this process's environment to the server's.
        cwd: the server's working directory.
        timeout: seconds to wait for the server to start, and for each call before it is cancelled
            and the server restarted.

    Use as a context manager, or :meth:`start` and :meth:`close`.
    """

    def __init__(self, command: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                 pass_env: Iterable[str] = (), cwd: str | None = None, timeout: float = 60.0) -> None:
        argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
        if not argv:
            raise ValueError("an MCP server needs a command. Fix: pass e.g. 'python -m mcp_server_time'")
        self.command = argv
        self.env = dict(env or {})
        self.pass_env = list(pass_env)
        self.cwd = cwd
        self.timeout = timeout
        self.tools: list[Tool] = []
        self.restarts = 0
        self._loop: Any = None
        self._thread: threading.Thread | None = None
        self._session: Any = None
        self._stop: Any = None
        self._task: Any = None
        self._restarting: concurrent.futures.Future[Any] | None = None
        self._broken: str | None = None
        self._environment: dict[str, str] = {}
        self._errlog: Any = None

    @property
    def name(self) -> str:
        """The command line, as errors name the server."""
        return shlex.join(self.command)

    # ------------------------------------------------------------ lifetime
    def start(self) -> MCPServer:
        """Start the server, initialize the session and list its tools."""
        if self._loop is not None:
            return self
        try:
            import asyncio

            from mcp import ClientSession, StdioServerParameters  # noqa: F401 - checked here, used in _serve
        except ImportError as exc:
            raise HammerError(_INSTALL_HINT) from exc
        environment = self._environment = server_environment(self.pass_env, self.env)
        if os.sep not in self.command[0] and shutil.which(self.command[0], path=environment.get("PATH")) is None:
            raise HammerError(f"MCP server {self.name!r} did not start: {printable(self.command[0])!r} is not a "
                              "command on its PATH. Fix: install it, or give its full path")
        self._errlog = _printable_stderr(self.name)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hammer-mcp", daemon=True)
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._launch(environment), self._loop)
        try:
            listed = future.result(self.timeout + 5)
        except BaseException as exc:
            future.cancel()
            self.close()
            raise HammerError(f"MCP server {self.name!r} did not start ({type(exc).__name__}: "
                              f"{exc}). Fix: check the command runs on its own") from exc
        try:  # names checked as every binding checks them: one server's tools told apart by a person
            self.tools = to_tools([mcp_tool_to_tool(t) for t in listed])
        except HammerError as exc:
            self.close()
            raise HammerError(f"MCP server {self.name!r} lists tools hammer refuses: {exc}") from exc
        return self

    async def _launch(self, environment: dict[str, str]) -> list[Any]:
        """Start the session's task and wait until it has listed the tools."""
        import asyncio

        ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._task = asyncio.create_task(self._serve(environment, ready, self._stop))
        try:
            return await asyncio.wait_for(asyncio.shield(ready), self.timeout)
        except BaseException:
            await self._shutdown()
            raise

    async def _serve(self, environment: dict[str, str], ready: Any, stop: Any) -> None:
        """The session's task: open it, list the tools, then hold it open until ``stop`` is set."""
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        # Forked by the SDK in the MCP session's loop thread, where no parent-death signal can be passed: the
        # command sets its own first, so a killed hammer leaves no server behind (one that ignores the end of
        # its input would otherwise run on).
        argv = guarded_command(self.command)
        params = StdioServerParameters(command=argv[0], args=argv[1:], env=environment, cwd=self.cwd)
        try:
            async with stdio_client(params, errlog=self._errlog) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                tools: list[Any] = []
                cursor = None
                while True:
                    page = await session.list_tools(cursor)
                    tools.extend(page.tools)
                    cursor = page.nextCursor
                    if not cursor:
                        break
                self._session = session
                ready.set_result(tools)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif not isinstance(exc, Exception):
                raise
        finally:
            self._session = None

    async def _shutdown(self) -> None:
        """End the session's task: the SDK closes the server's stdin, then terminates it."""
        import asyncio

        task, self._task, self._session = self._task, None, None
        if task is None:
            return
        if self._stop is not None:
            self._stop.set()
        try:
            await asyncio.wait_for(task, self.timeout)
        except BaseException:  # noqa: BLE001 - a server that died, or would not stop, is closed too
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def _restart(self) -> None:
        await self._shutdown()
        await self._launch(self._environment)
        self.restarts += 1

    def close(self) -> None:
        """Stop the server and its event loop (idempotent)."""
        import asyncio

        loop = self._loop
        if loop is None:
            return
        if loop.is_running():
            with contextlib.suppress(BaseException):
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(self.timeout + 5)
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(self.timeout)
        if not loop.is_running():
            loop.close()
        if self._errlog is not None:
            self._errlog.close()  # the relay ends when the server's copy of the pipe closes too
        self._loop = self._thread = self._session = self._task = self._restarting = self._errlog = None

    def __enter__(self) -> MCPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ calls
    def _wait_for_restart(self) -> None:
        restarting = self._restarting
        if restarting is None:
            return
        try:
            restarting.result(self.timeout + 5)
        except BaseException as exc:  # noqa: BLE001 - reported on every call from now on
            self._broken = f"{type(exc).__name__}: {exc}"
        self._restarting = None

    def call(self, name: str, arguments: Mapping[str, Any] | None = None, *, timeout: float | None = None) -> str:
        """Call a tool on the server; its text.

        Raises :class:`MCPToolError` when the server reports an error, and :class:`MCPTimeoutError`
        when it has not answered after ``timeout`` seconds (default: the server's): the call is then
        cancelled and the server restarted in the background, so the next call does not wait on it.
        """
        import asyncio

        self._wait_for_restart()
        if self._broken is not None:
            raise HammerError(f"the MCP server {self.name!r} could not be restarted after a call hung "
                              f"({self._broken}). Fix: check the command runs on its own, then start it again")
        if self._loop is None:
            raise HammerError("the MCP server is not running. Fix: use it inside `with MCPServer(...)` or call start()")
        if self._session is None:
            raise HammerError(f"the MCP server {self.name!r} has stopped (see its messages above). Fix: check the "
                              "command runs on its own, then start it again")
        limit = self.timeout if timeout is None else timeout
        future = asyncio.run_coroutine_threadsafe(self._session.call_tool(name, dict(arguments or {})), self._loop)
        try:
            result = future.result(limit)
        except concurrent.futures.TimeoutError:
            future.cancel()
            self._restarting = asyncio.run_coroutine_threadsafe(self._restart(), self._loop)
            raise MCPTimeoutError(
                f"the MCP tool {name!r} of server {self.name!r} did not answer within {limit:g} s; the call was "
                "cancelled and the server restarted. Fix: give it longer (MCPServer(timeout=...), hammer chat "
                "--mcp-timeout), or check the tool") from None
        text = result_text(result)
        if getattr(result, "isError", False):
            raise MCPToolError(text or f"the MCP tool {name!r} failed")
        return text

    def functions(self) -> dict[str, Callable[..., str]]:
        """One Python callable per tool (keyword arguments in, the result's text out), by tool name."""
        def bind(name: str) -> Callable[..., str]:
            def function(**arguments: Any) -> str:
                return self.call(name, arguments)

            function.__name__ = name
            return function

        return {tool.name: bind(tool.name) for tool in self.tools}


class MCPNameClashError(HammerError):
    """Two MCP servers (or a server and the tools given besides) offer one tool name, or names a person cannot
    tell apart: a call of that name could reach either, so the second is refused."""


_SHOWN_OWNER = 320  # characters of a server's command line an error shows


def _owner(label: str) -> str:
    """A server's command line for an error, quoted; a long one keeps its head and its tail, where two
    commands of one program differ (their arguments)."""
    shown = label if len(label) <= _SHOWN_OWNER else label[:100] + "..." + label[-(_SHOWN_OWNER - 103):]
    return repr(shown)  # repr: an escape sequence in it is shown, not run by the terminal


class MCPToolbox:
    """MCP servers started one at a time into one set of tools, where one name is one tool: the one rule of names
    across servers, for every door (``hammer call``, ``hammer chat``, ``hammer playground`` and any other).

    A server whose tool has a name already taken (by an earlier server, or by the tools given besides, such as a
    ``--tools`` file), or one a person cannot tell from a taken one (invisible or look-alike characters: the
    keys of :mod:`~hammer_plugins.tools.names`), is closed and refused with :class:`MCPNameClashError` naming
    both. Names are never rewritten (no per-server prefix): the model and the person read the names the
    servers gave, and which server a call reaches never depends on the order the servers started in.

    Args:
        given: names taken before any server (the tools given besides), and ``given_by``, what they are called.
        stack, env, pass_env, timeout: as :func:`attach_mcp`.

    Example:
        >>> box = MCPToolbox(given=["get_current_time"], given_by="the --tools file")
        >>> box.claim("python -m mcp_server_time", ["convert_time", "get_current_time"])
        Traceback (most recent call last):
        ...
        hammer_plugins.mcp.client.MCPNameClashError: the tool name 'get_current_time' of the MCP server ...
        >>> box.claim("python -m mcp_server_time", ["convert_time"])
    """

    def __init__(self, *, given: Iterable[str] = (), given_by: str = "the tools given",
                 stack: contextlib.ExitStack | None = None, env: Mapping[str, str] | None = None,
                 pass_env: Iterable[str] = (), timeout: float = 60.0) -> None:
        self.stack = stack
        self.env = dict(env or {})
        self.pass_env = list(pass_env)
        self.timeout = timeout
        self.tools: list[Tool] = []
        self.functions: dict[str, Callable[..., Any]] = {}
        self._taken: dict[str, tuple[str, str]] = {}  # what a person sees of a name -> (its owner, the name)
        self._given_by = (given_by,)
        self.claim(given_by, given)

    def claim(self, owner: str, names: Iterable[str]) -> None:
        """Take ``names`` for ``owner``, or raise :class:`MCPNameClashError` (taking none) when one is taken."""
        from hammer_plugins.tools.names import look_alike_key, name_key

        keys = {look_alike_key(name_key(name)): name for name in names}
        for key, name in keys.items():
            if key in self._taken:
                other, taken = self._taken[key]
                # repr, as every name check shows names: invisible characters as escapes
                same = "is already taken by" if taken == name else f"looks like {taken!r} of"
                holder = other if other in self._given_by else f"the MCP server {_owner(other)}"
                raise MCPNameClashError(
                    f"the tool name {name!r} of the MCP server {_owner(owner)} {same} {holder}: one "
                    "name must be one tool, or a call could reach the wrong server. Fix: keep only one of them "
                    "(drop one --mcp server, or the tool given besides), or rename the tool in one of them")
        self._taken.update({key: (owner, name) for key, name in keys.items()})

    def add(self, command: str) -> MCPServer:
        """Start the server of ``command`` and add its tools, or close it and raise (it did not start, or a name
        clashes: :meth:`claim`)."""
        server = MCPServer(command, env=self.env, pass_env=self.pass_env, timeout=self.timeout)
        if self.stack is not None:
            self.stack.callback(server.close)
        atexit.register(server.close)
        server.start()
        try:
            self.claim(server.name, [tool.name for tool in server.tools])
        except MCPNameClashError:
            server.close()  # refused: none of its tools is offered, so it need not run
            raise
        self.tools.extend(server.tools)
        self.functions.update(server.functions())
        return server


def attach_mcp(commands: Sequence[str], tools: Sequence[Tool] = (),
               functions: Mapping[str, Callable[..., Any]] | None = None, *,
               stack: contextlib.ExitStack | None = None, env: Mapping[str, str] | None = None,
               pass_env: Iterable[str] = (), timeout: float = 60.0,
               ) -> tuple[list[Tool], dict[str, Callable[..., Any]]]:
    """Start an MCP server per command and add its tools (and callables) to ``tools`` and ``functions``.

    For the ``hammer`` command (``--mcp``, ``--mcp-env``, ``--mcp-timeout``): the servers close when
    ``stack`` closes (and at the latest when the process exits normally). Names across servers (and ``tools``)
    follow :class:`MCPToolbox`'s rule: a clash is refused with :class:`MCPNameClashError`, naming both.
    """
    box = MCPToolbox(given=[tool.name for tool in tools], given_by="the tools given (--tools)", stack=stack,
                     env=env, pass_env=pass_env, timeout=timeout)
    for command in commands:
        box.add(command)
    return to_tools([*tools, *box.tools]), {**(functions or {}), **box.functions}
