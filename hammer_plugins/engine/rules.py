"""The rules every request is held to, written once for every door.

A request needs a message; a tool result must answer a call an earlier assistant turn made; its tools
must convert; its ``tool_choice`` must name a tool it has (and needs tools unless it is ``auto`` or
``none``). A broken rule raises a :class:`~hammer_plugins.values.errors.RequestError` whose ``loc`` is the
place in the engine's request (``("messages", 3, "tool_call_id")``, ``("tools", 2)``, ``("tool_choice",)``);
each API door renames that place into its own field names. The planner calls the same functions, so a
request built in Python is held to them too.

Example:
    >>> from hammer_plugins import Message
    >>> try:
    ...     check_messages([Message.user("hi"), Message.tool("21 degrees", tool_call_id="call_1")])
    ... except RequestError as exc:
    ...     print(exc.loc, exc.rule)
    ('messages', 1, 'tool_call_id') unanswered_result
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hammer_plugins.tools.choice import normalize_tool_choice
from hammer_plugins.tools.definition import Tool, to_tools
from hammer_plugins.tools.names import printable
from hammer_plugins.values.errors import RequestError, SchemaConversionError, UnknownToolError
from hammer_plugins.values.messages import Message

if TYPE_CHECKING:
    from hammer_plugins.engine.request import EngineRequest

NO_TOOL_CHOICES = (None, "auto", "none")
"""``tool_choice`` values a request without tools may carry (they mean: answer without tools)."""


def unanswered_result(messages: Sequence[Message]) -> int | None:
    """The index of the first tool result that answers no call an earlier assistant turn made, or ``None``.

    A result without an id (OpenAI's legacy ``function`` role, a dialogue whose assistant wrote its call as text)
    answers the assistant turn before it. Linear in the messages: the calls made so far are kept in a set.

    Example:
        >>> from hammer_plugins import ToolCall
        >>> call = ToolCall(id="call_1", name="f", arguments={})
        >>> unanswered_result([Message.assistant(tool_calls=[call]), Message.tool("ok", tool_call_id="call_1")]) is None
        True
    """
    called: set[str] = set()
    assistant = False
    for index, message in enumerate(messages):
        if message.role == "assistant":
            assistant = True
            called.update(call.id for call in message.tool_calls)
        elif message.role == "tool" and (message.tool_call_id not in called if message.tool_call_id is not None
                                         else not assistant):
            return index
    return None


def check_messages(messages: Sequence[Message]) -> None:
    """At least one message, and every tool result answering a call made before it."""
    if not messages:
        raise RequestError("messages is empty. Fix: pass at least one user message", ("messages",), rule="empty")
    lone = unanswered_result(messages)
    if lone is not None:
        answered = messages[lone].tool_call_id
        what = f"the call {shown_id(answered)}" if answered is not None else "a call"
        raise RequestError(f"messages[{lone}] is a tool result for {what}, which no earlier assistant message made. "
                           "Fix: send the assistant message with its tool calls before their results",
                           ("messages", lone, "tool_call_id"), rule="unanswered_result")


SHOWN_ID_CHARACTERS = 80
"""Characters of a client's call id an error repeats (an id is the client's text: never echoed unbounded)."""


def shown_id(call_id: str | None) -> str:
    """A call id as an error quotes it: bounded and printable.

    Example:
        >>> shown_id("call_1"), len(shown_id("x" * 10_000)) < 100
        ("'call_1'", True)
    """
    text = str(call_id)
    return printable(repr(text[:SHOWN_ID_CHARACTERS] + ("..." if len(text) > SHOWN_ID_CHARACTERS else "")))


def raw_tool_name(tool: Any) -> str | None:
    """The name a tool description gives itself, before conversion (an OpenAI function tool, a dict, an object)."""
    if isinstance(tool, Mapping):
        function = tool.get("function", tool)
        return function.get("name") if isinstance(function, Mapping) else None
    return getattr(tool, "name", None) or getattr(tool, "__name__", None)


def place_tool_error(exc: SchemaConversionError, tools: Sequence[Any]) -> SchemaConversionError:
    """``exc`` with its ``loc`` set to the tool it names (``("tools", i)``): the second of two tools that share
    a name, else the first with that name."""
    places = [i for i, tool in enumerate(tools) if raw_tool_name(tool) == exc.tool]
    if places:
        exc.loc = ("tools", places[-1] if "share this name" in str(exc) else places[0])
    return exc


def check_tools(tools: Sequence[Any]) -> list[Tool]:
    """The tools converted (once: a set seen recently comes from the cache); a tool that cannot be is a
    :class:`~hammer_plugins.values.errors.SchemaConversionError` placed at ``("tools", i)``."""
    try:
        return to_tools(tools)
    except SchemaConversionError as exc:
        raise place_tool_error(exc, tools) from None


def resolve_tool_choice(choice: Any, tool_names: Sequence[str]) -> str:
    """``tool_choice`` as ``"auto"``, ``"required"``, ``"none"`` or a tool's name; without tools, ``"none"`` (a
    choice that needs tools is a :class:`RequestError` at ``("tool_choice",)``).

    Example:
        >>> resolve_tool_choice({"type": "auto"}, []), resolve_tool_choice("any", ["f"])
        ('none', 'required')
    """
    if not tool_names:
        kind = choice.get("type") if isinstance(choice, Mapping) else choice
        if choice is False or (kind in NO_TOOL_CHOICES and not (isinstance(choice, Mapping) and "function" in choice)):
            return "none"
        raise RequestError(f"tool_choice {str(choice)[:80]!r} needs tools, and the request has none. Fix: send the "
                           "tools, or leave tool_choice out", ("tool_choice",), "invalid_value")
    return normalize_tool_choice(choice, tool_names)


def check_pinned(pinned: Sequence[str], tool_names: Sequence[str]) -> None:
    """Every pinned name is one of the tools: else an :class:`~hammer_plugins.values.errors.UnknownToolError` at
    ``("pinned_tools", i)``, the first name that is not.

    Example:
        >>> try:
        ...     check_pinned(["get_weather", "get_tme"], ["get_weather", "get_time"])
        ... except UnknownToolError as exc:
        ...     print(exc.loc)
        ('pinned_tools', 1)
    """
    known = set(tool_names)
    unknown = [(i, name) for i, name in enumerate(pinned) if name not in known]
    if unknown:
        shown = [printable(name[:SHOWN_ID_CHARACTERS]) for _, name in unknown[:8]]
        raise UnknownToolError(f"pinned tools {shown} are not among the {len(known)} tools given. Fix: pin names of "
                               "tools you pass, e.g. pinned_tools=['get_weather'].", ("pinned_tools", unknown[0][0]))


def check_request(request: EngineRequest) -> str:
    """Every rule above for ``request``, as the planner holds it to them; its normalized ``tool_choice``.

    A door calls it while it reads a body, so a broken rule is answered (400, in the API's field names) before
    the request waits for the model."""
    check_messages(request.messages)
    tools = check_tools(request.tools)
    names = [tool.name for tool in tools]
    check_pinned(request.pinned_tools, names)
    return resolve_tool_choice(request.tool_choice, names)
