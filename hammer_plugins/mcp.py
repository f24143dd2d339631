"""MCP servers' tools for the engine and the ``hammer`` command, framework-free.

An MCP server (Model Context Protocol) started as a command (stdio transport) lists its tools with
JSON Schemas; :class:`MCPServer` turns them into :class:`~hammer_plugins.tools.Tool` s (``$ref`` is
inlined against ``$defs``, ``Optional`` collapsed, defaults kept: :func:`~hammer_plugins.tools.normalize_parameters`)
and calls them through the server. It needs the ``mcp`` SDK (``pip install "hammer-plugins[mcp]"``),
imported only when a server starts. The server runs on an event loop in a background thread, so the
API is synchronous and works inside and outside ``asyncio``.

In LangChain and LlamaIndex, use their own MCP clients (``langchain-mcp-adapters``,
``llama-index-tools-mcp``): their tools bind to ``ChatHammer`` and ``HammerLLM`` as they come.

Example (needs ``pip install mcp-server-time``)::

    from hammer_plugins import HammerEngine, Message
    from hammer_plugins.mcp import MCPServer

    with MCPServer("python -m mcp_server_time --local-timezone UTC") as server:
        reply = HammerEngine().generate([Message.user("What time is it in Tokyo?")], tools=server.tools)
        for call in reply.tool_calls:
            print(server.call(call.name, call.arguments))

On the command line: ``hammer call "..." --mcp "python -m mcp_server_time"`` (the schemas only) and
``hammer chat --mcp "..."`` (runs the calls through the server).
"""

from __future__ import annotations

import atexit
import os
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from .errors import HammerError
from .tools import Tool

_INSTALL_HINT = 'the MCP client needs the mcp SDK. Fix: pip install "hammer-plugins[mcp]" (or pip install mcp)'


class MCPToolError(HammerError):
    """A tool call the MCP server answered with ``isError`` (its text is the message)."""


def mcp_tool_to_tool(tool: Any) -> Tool:
    """An MCP tool (``mcp.types.Tool`` or its dict: ``name``, ``description``, ``inputSchema``) as a :class:`Tool`.

    Example:
        >>> mcp_tool_to_tool({"name": "get_current_time", "description": "Get current time",
        ...     "inputSchema": {"type": "object", "properties": {"timezone": {"type": "string"}},
        ...                     "required": ["timezone"]}}).to_hammer()["parameters"]
        {'timezone': {'type': 'string', 'required': True}}
    """
    data = tool if isinstance(tool, Mapping) else tool.model_dump()
    schema = dict(data.get("inputSchema") or data.get("input_schema") or {"type": "object", "properties": {}})
    schema.pop("title", None)
    return Tool(name=str(data["name"]), description=str(data.get("description") or ""), parameters=schema)


def result_text(result: Any) -> str:
    """The text of an MCP ``CallToolResult``: its text blocks joined, else its structured content as JSON."""
    import json

    texts = [getattr(block, "text", None) for block in getattr(result, "content", None) or []]
    joined = "\n".join(t for t in texts if t)
    if joined:
        return joined
    structured = getattr(result, "structuredContent", None)
    return json.dumps(structured, ensure_ascii=False) if structured is not None else ""


class MCPServer:
    """One MCP server run as a subprocess over stdio: its tools, and calls to them.

    Args:
        command: the command line (a string, split as a shell would) or an argv list.
        env: extra environment variables for the server (added to this process's environment).
        cwd: the server's working directory.
        timeout: seconds to wait for the server to start and for each call.

    Use as a context manager, or :meth:`start` and :meth:`close`.
    """

    def __init__(self, command: str | Sequence[str], *, env: Mapping[str, str] | None = None,
                 cwd: str | None = None, timeout: float = 60.0) -> None:
        argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
        if not argv:
            raise ValueError("an MCP server needs a command. Fix: pass e.g. 'python -m mcp_server_time'")
        self.command = argv
        self.env = dict(env or {})
        self.cwd = cwd
        self.timeout = timeout
        self.tools: list[Tool] = []
        self._loop: Any = None
        self._thread: threading.Thread | None = None
        self._session: Any = None
        self._stop: Any = None
        self._main: Future[None] | None = None

    # ------------------------------------------------------------ lifetime
    def start(self) -> MCPServer:
        """Start the server, initialize the session and list its tools."""
        if self._main is not None:
            return self
        try:
            import asyncio

            from mcp import ClientSession, StdioServerParameters  # noqa: F401 - checked here, used in _serve
        except ImportError as exc:
            raise HammerError(_INSTALL_HINT) from exc
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="hammer-mcp", daemon=True)
        self._thread.start()
        ready: Future[list[Any]] = Future()
        self._main = asyncio.run_coroutine_threadsafe(self._serve(ready), self._loop)
        try:
            listed = ready.result(self.timeout)
        except BaseException as exc:
            self.close()
            raise HammerError(f"MCP server {shlex.join(self.command)!r} did not start ({type(exc).__name__}: "
                              f"{exc}). Fix: check the command runs on its own") from exc
        self.tools = [mcp_tool_to_tool(t) for t in listed]
        return self

    async def _serve(self, ready: Future[list[Any]]) -> None:
        """The session's task: open it, list the tools, then hold it open until :meth:`close`."""
        import asyncio

        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(command=self.command[0], args=self.command[1:],
                                       env={**os.environ, **self.env}, cwd=self.cwd)
        self._stop = asyncio.Event()
        try:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
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
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:
                raise
        finally:
            self._session = None

    def close(self) -> None:
        """Stop the server and its event loop (idempotent)."""
        loop, main = self._loop, self._main
        if loop is None:
            return
        if main is not None and self._stop is not None:
            loop.call_soon_threadsafe(self._stop.set)
            try:
                main.result(self.timeout)
            except BaseException:  # noqa: BLE001 - a server that died is closed too
                pass
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(self.timeout)
        if not loop.is_running():
            loop.close()
        self._loop = self._thread = self._main = self._session = None

    def __enter__(self) -> MCPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ calls
    def call(self, name: str, arguments: Mapping[str, Any] | None = None) -> str:
        """Call a tool on the server; its text. Raises :class:`MCPToolError` when the server reports an error."""
        import asyncio

        if self._session is None:
            raise HammerError("the MCP server is not running. Fix: use it inside `with MCPServer(...)` or call start()")
        future = asyncio.run_coroutine_threadsafe(self._session.call_tool(name, dict(arguments or {})), self._loop)
        result = future.result(self.timeout)
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


def attach_mcp(commands: Sequence[str], tools: Sequence[Tool] = (),
               functions: Mapping[str, Callable[..., Any]] | None = None) -> tuple[list[Tool], dict[str, Callable[..., Any]]]:
    """Start an MCP server per command and add its tools (and callables) to ``tools`` and ``functions``.

    For the ``hammer`` command (``--mcp``): the servers live until the process exits.
    """
    all_tools = list(tools)
    all_functions = dict(functions or {})
    for command in commands:
        server = MCPServer(command).start()
        atexit.register(server.close)
        all_tools.extend(server.tools)
        all_functions.update(server.functions())
    return all_tools, all_functions
