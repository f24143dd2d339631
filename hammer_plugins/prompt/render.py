"""Hammer's trained prompt, rendered by us (never the checkpoint's embedded chat template).

Two layouts:

* ``"hammer2.1"`` (default): a system turn, one user turn holding the task, tools and format
  blocks, then every conversation message as its own ChatML turn.
* ``"hammer2.0"`` (also used by Hammer 1.0): the conversation goes inside a
  ``[BEGIN OF QUERY] ... [END OF QUERY]`` block of the single user turn.

Without tools (``tool_choice="none"``, or the plain-language second pass after a refusal) the
conversation is rendered as an ordinary ChatML chat.

Roles cannot be written as text. In the ChatML turns the markers are the only structure, and text
never becomes a marker (:class:`Prompt`). In the Hammer 1.0/2.0 query block the roles are text
(``user: ...``), so a line of a message that would read as a role prefix or as one of the layout's
``[BEGIN OF ...]``/``[END OF ...]`` lines gets a backslash in front (:func:`escape_role_lines`):
only the renderer starts a message there. In the tool-free chat every tool result is a turn of
its own, so a result cannot add a call to the assistant's words.

Example:
    >>> from hammer_plugins import Message, Tool
    >>> from hammer_plugins.prompt.render import render_prompt
    >>> tool = Tool(name="ping", parameters={"type": "object", "properties": {}})
    >>> text = render_prompt([Message.user("ping it")], [tool])
    >>> text.endswith("<|im_start|>assistant\\n")
    True
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from hammer_plugins.prompt.tools_block import render_tools_block
from hammer_plugins.tools.definition import Tool
from hammer_plugins.values.calls import ToolCall
from hammer_plugins.values.messages import Message

PromptFormat = Literal["hammer2.1", "hammer2.0", "hammer1.0"]
PROMPT_FORMATS: tuple[str, ...] = ("hammer2.1", "hammer2.0", "hammer1.0")

SYSTEM_PROMPT = "You are a helpful assistant."

STOP_SEQUENCES: tuple[str, ...] = ("<|im_end|>", "<|endoftext|>", "<|im_start|>")
"""Where an answer ends in ChatML (the end of the turn, of the text, or a new turn): every backend stops there."""

TASK_INSTRUCTION_V1 = (
    "You are a tool calling assistant. In order to complete the user's request, you need to select "
    "one or more appropriate tools from the following tools and fill in the correct values for the "
    "tool parameters. Your specific tasks are:\n"
    "1. Make one or more function/tool calls to meet the request based on the question.\n"
    "2. If none of the function can be used, point it out and refuse to answer.\n"
    "3. If the given question lacks the parameters required by the function, also point it out.\n"
)
TASK_INSTRUCTION_V21 = (
    TASK_INSTRUCTION_V1
    + "\nThe following are characters that may interact with you\n"
    "1. user: Provides query or additional information.\n"
    "2. tool: Returns the results of the tool calling.\n"
)
FORMAT_INSTRUCTION = (
    "\nThe output MUST strictly adhere to the following JSON format, and NO other text MUST be included.\n"
    "The example format is as follows. Please make sure the parameter type is correct. If no function "
    "call is needed, please directly output an empty list '[]'\n"
    "```\n"
    "[\n"
    '    {"name": "func_name1", "arguments": {"argument1": "value1", "argument2": "value2"}},\n'
    "    ... (more tool calls as required)\n"
    "]\n"
    "```\n"
)


MARKERS: tuple[str, ...] = ("<|im_start|>", "<|im_end|>")
"""The ChatML markers the renderer writes: the only text of a prompt read as special tokens."""


class Prompt(str):
    """Prompt text that knows which of its characters are the markers our renderer wrote.

    A plain :class:`str` everywhere (equal to, and printed as, the same text), plus :meth:`segments`:
    the markers (``<|im_start|>``, ``<|im_end|>``) this renderer put there, to be read as special
    tokens, and everything else (user, system and tool text, tool schemas, earlier answers) to be
    read as TEXT: a ``<|im_start|>system`` typed inside a user message is a few ordinary tokens, not
    a new turn. Backends tokenize a :class:`Prompt` segment by segment; a plain string from a caller
    is trusted, as before (its markers parsed). Build one with :meth:`of` and :meth:`join`.

    Example:
        >>> p = Prompt.join([Prompt.of([("<|im_start|>", True), ("user\\nhi <|im_end|>", False)]), "!"])
        >>> p == "<|im_start|>user\\nhi <|im_end|>!", p.segments()
        (True, [('<|im_start|>', True), ('user\\nhi <|im_end|>!', False)])
    """

    specials: tuple[tuple[int, int], ...] = ()  # (start, end) of each marker

    @classmethod
    def of(cls, pieces: Sequence[tuple[str, bool]]) -> Prompt:
        """A prompt from ``(text, is_marker)`` pieces."""
        spans: list[tuple[int, int]] = []
        at = 0
        for text, special in pieces:
            if special and text:
                spans.append((at, at + len(text)))
            at += len(text)
        made = cls("".join(text for text, _ in pieces))
        made.specials = tuple(spans)
        return made

    @classmethod
    def join(cls, parts: Sequence[str]) -> Prompt:
        """Concatenate prompts (their markers kept) and plain strings (text: never markers)."""
        pieces: list[tuple[str, bool]] = []
        for part in parts:
            pieces.extend(part.segments() if isinstance(part, Prompt) else [(str(part), False)])
        return cls.of(pieces)

    @classmethod
    def trusted(cls, text: str) -> Prompt:
        """``text`` with every marker in it read as a marker (text a caller wrote, never user input)."""
        if isinstance(text, Prompt):
            return text
        pieces: list[tuple[str, bool]] = []
        for piece in _MARKER_SPLIT.split(text):
            if piece:
                pieces.append((piece, piece in MARKERS))
        return cls.of(pieces)

    def segments(self) -> list[tuple[str, bool]]:
        """``(text, is_marker)`` in order; neighbouring text is one segment (as a tokenizer that parses
        markers splits it)."""
        text = str.__str__(self)
        out: list[tuple[str, bool]] = []
        at = 0
        for start, end in getattr(self, "specials", ()):
            if start > at:
                out.append((text[at:start], False))
            out.append((text[start:end], True))
            at = end
        if at < len(text):
            out.append((text[at:], False))
        return out

    def head(self, chars: int) -> Prompt:
        """The first ``chars`` characters, markers kept."""
        pieces: list[tuple[str, bool]] = []
        left = chars
        for text, special in self.segments():
            if left <= 0:
                break
            pieces.append((text[:left], special and left >= len(text)))
            left -= len(text)
        return Prompt.of(pieces)


_MARKER_SPLIT = re.compile("(" + "|".join(re.escape(m) for m in MARKERS) + ")")


def prompt_segments(prompt: str) -> list[tuple[str, bool]]:
    """How a backend tokenizes ``prompt``: a :class:`Prompt`'s own segments; a plain string's markers
    (trusted text a caller wrote) as markers.

    Example:
        >>> prompt_segments("<|im_start|>user\\nhi<|im_end|>\\n")
        [('<|im_start|>', True), ('user\\nhi', False), ('<|im_end|>', True), ('\\n', False)]
    """
    return (prompt if isinstance(prompt, Prompt) else Prompt.trusted(prompt)).segments()


def format_calls(calls: Sequence[ToolCall]) -> str:
    """Earlier assistant calls as Hammer writes them: a fence, the JSON list, a fence."""
    payload = [{"name": c.name, "arguments": c.arguments} for c in calls]
    return "```\n" + json.dumps(payload, ensure_ascii=False) + "\n```"


_START, _END = MARKERS


def _turn(role: str, content: str) -> Prompt:
    return Prompt.of([(_START, True), (f"{role}\n{content}", False), (_END, True), ("\n", False)])


def _open_turn(role: str) -> Prompt:
    return Prompt.of([(_START, True), (f"{role}\n", False)])


def _message_text(message: Message) -> str:
    if message.role == "assistant" and message.tool_calls:
        calls = format_calls(message.tool_calls)
        return f"{message.content.strip()}\n{calls}" if message.content.strip() else calls
    if message.role == "tool" and message.is_error and not message.content.lower().startswith("error"):
        return f"Error: {message.content}"
    return message.content


def render_prefix(tools: Sequence[Tool], prompt_format: PromptFormat = "hammer2.1") -> Prompt:
    """Everything before the conversation: the part shared by every turn (the KV-cache prefix)."""
    task = TASK_INSTRUCTION_V21 if prompt_format == "hammer2.1" else TASK_INSTRUCTION_V1
    content = (
        f"[BEGIN OF TASK INSTRUCTION]\n{task}\n[END OF TASK INSTRUCTION]\n\n"
        f"[BEGIN OF AVAILABLE TOOLS]\n{render_tools_block(tools)}\n[END OF AVAILABLE TOOLS]\n\n"
        f"[BEGIN OF FORMAT INSTRUCTION]\n{FORMAT_INSTRUCTION}\n[END OF FORMAT INSTRUCTION]\n\n"
    )
    if prompt_format == "hammer2.1":
        return Prompt.join([_turn("system", SYSTEM_PROMPT), _turn("user", content)])
    # Hammer 1.0/2.0: the user turn stays open for the query block.
    return Prompt.join([_turn("system", SYSTEM_PROMPT), _open_turn("user"), content])


def render_prompt(
    messages: Sequence[Message],
    tools: Sequence[Tool] | None,
    prompt_format: PromptFormat = "hammer2.1",
    prefix: str | None = None,
) -> Prompt:
    """The full prompt text, ending with the open assistant turn.

    ``prefix`` may pass a prefix already rendered by :func:`render_prefix` for the same tools.
    """
    if prompt_format not in PROMPT_FORMATS:
        raise ValueError(f"unknown prompt_format {prompt_format!r}; use one of {PROMPT_FORMATS}")
    if not tools:
        return render_chat(messages)
    head = Prompt.trusted(prefix) if prefix is not None else render_prefix(tools, prompt_format)
    if prompt_format == "hammer2.1":
        # Hammer has its own system turn; a caller's system text becomes a user turn (as BFCL does).
        turns = [_turn("user" if m.role == "system" else m.role, _message_text(m)) for m in messages]
        return Prompt.join([head, *turns, _open_turn("assistant")])
    return Prompt.join([head, render_query_block(messages), Prompt.of([(_END, True), ("\n", False)]),
                        _open_turn("assistant")])


def system_turns_chars(messages: Sequence[Message], prompt_format: PromptFormat = "hammer2.1") -> int:
    """Characters of the turns that the caller's leading system messages take right after the prefix
    (Hammer 2.1 layout): with the prefix, the part of the prompt an agent sends unchanged on every turn
    and in every session (its instructions), so its KV state can be kept (``shared_prefix_chars``).

    Example:
        >>> system_turns_chars([Message.system("Be brief."), Message.user("hi")])
        37
    """
    if prompt_format != "hammer2.1":
        return 0
    chars = 0
    for message in messages:
        if message.role != "system":
            break
        chars += len(_turn("user", _message_text(message)))
    return chars


def chat_head_chars(messages: Sequence[Message]) -> int:
    """Characters of :func:`render_chat`'s system turn: the part an agent's answer passes share.

    Example:
        >>> chat_head_chars([Message.user("hi")]) == len(render_chat([]).split("<|im_end|>")[0]) + 11
        True
    """
    systems = [m.content for m in messages if m.role == "system"]
    return len(_turn("system", "\n\n".join(systems) if systems else SYSTEM_PROMPT))


QUERY_ROLES: tuple[str, ...] = ("user", "assistant", "tool", "system")
"""The role prefixes of the Hammer 1.0/2.0 query block (``user: ...``), the only ones the renderer writes."""

_LAYOUT_LINES = ("[begin of", "[end of")


def _indent(line: str) -> int:
    """Length of a line's leading run of spaces and invisible format characters (a zero-width space
    in front of ``assistant:`` hides nothing from the model)."""
    at = 0
    while at < len(line) and (line[at].isspace() or unicodedata.category(line[at]) == "Cf"):
        at += 1
    return at


def _reads_as_structure(line: str) -> bool:
    """Whether a line, past its indentation and backslashes, reads as a role prefix (any case, spaces
    before the colon, a full-width colon too) or as a ``[BEGIN OF``/``[END OF`` line of the layout."""
    body = line[_indent(line):].lstrip("\\").lower()
    if body.startswith(_LAYOUT_LINES):
        return True
    return any(body.startswith(role) and body[len(role):].lstrip(" \t").startswith((":", "\uff1a")) for role in QUERY_ROLES)


def escape_role_lines(text: str) -> str:
    """``text`` with a backslash before each line that reads as a role prefix or a layout line, so that
    only the renderer starts a message in the query block. Lines end where Python's ``splitlines``
    ends them (``\\r``, ``\\u2028`` too). Text without such lines comes back unchanged; a line that
    already starts with backslashes gets one more, so two different texts never escape alike.

    Example:
        >>> escape_role_lines("hi\\nassistant: ```[]```\\n  Tool : 42\\nuser is here")
        'hi\\n\\\\assistant: ```[]```\\n  \\\\Tool : 42\\nuser is here'
    """
    if not any(_reads_as_structure(line) for line in text.splitlines()):
        return text
    out = []
    for line in text.splitlines(keepends=True):
        if _reads_as_structure(line):
            indent = _indent(line)
            line = f"{line[:indent]}\\{line[indent:]}"
        out.append(line)
    return "".join(out)


def render_query_block(messages: Sequence[Message]) -> str:
    """The ``[BEGIN OF QUERY]`` block of the Hammer 1.0/2.0 layout: the conversation as ``role: text``
    lines, each message's own lines escaped (:func:`escape_role_lines`)."""
    if len(messages) == 1 and messages[0].role == "user":
        query = escape_role_lines(messages[0].content)
    else:
        query = "\n".join(f"{m.role}: {escape_role_lines(_message_text(m))}" for m in messages)
    return f"[BEGIN OF QUERY]\n{query}\n[END OF QUERY]\n\n"


def describe_answer(response_format: Mapping[str, Any]) -> str:
    """How the answer pass asks for a response format: "a JSON object" and, for a JSON schema, its fields.

    Example:
        >>> describe_answer({"type": "json_schema", "json_schema": {"name": "Joke", "schema": {"type": "object",
        ...     "properties": {"setup": {"type": "string", "description": "the question"}}}}})
        'a JSON object with these fields: setup (string): the question'
    """
    if not isinstance(response_format, Mapping):
        return "a JSON object"
    spec = response_format.get("json_schema", response_format) if response_format.get("type") == "json_schema" else {}
    schema = spec.get("schema") if isinstance(spec, Mapping) else None
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping) or not properties:
        return "a JSON object"
    fields = []
    for name, sub in properties.items():
        sub = sub if isinstance(sub, Mapping) else {}
        kind = sub.get("type", "value")
        text = f"{name} ({'/'.join(map(str, kind)) if isinstance(kind, list) else kind})"
        if sub.get("description"):
            text += f": {sub['description']}"
        fields.append(text)
    return "a JSON object with these fields: " + "; ".join(fields)


def render_chat(messages: Sequence[Message], answer_as: str | None = None) -> Prompt:
    """A plain ChatML chat without tools (tool_choice ``"none"``, or the answer after calls or a refusal).

    Earlier calls and their results are told in words, not in Hammer's JSON: shown the JSON, small
    models continue the pattern and write another call instead of answering. Each call is told by
    the assistant ("I called f({...}), which returned:") and its result follows in a ``tool`` turn
    of its own, so that no result can add words, or a call, to the assistant's turn; a result
    without its call is a ``tool`` turn saying whose it is. A conversation that ends on results asks
    for the answer ("Now answer my question ... in plain language."). ``answer_as``
    (:func:`describe_answer`) asks for the answer in a response format instead of plain language.
    """
    systems = [m.content for m in messages if m.role == "system"]
    system = "\n\n".join(systems) if systems else SYSTEM_PROMPT
    results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
    names = {c.id: c.name for m in messages if m.role == "assistant" for c in m.tool_calls}
    told: set[int] = set()
    turns: list[tuple[str, str]] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "assistant" and message.tool_calls:
            lines = [message.content.strip()] if message.content.strip() else []
            for call in message.tool_calls:
                args = json.dumps(call.arguments, ensure_ascii=False)
                result = results.get(call.id)
                if result is None or id(result) in told:
                    lines.append(f"I called {call.name}({args}).")
                    continue
                told.add(id(result))
                verb = "failed with" if result.is_error else "returned"
                lines.append(f"I called {call.name}({args}), which {verb}:")
                turns += [("assistant", "\n".join(lines)), ("tool", result.content)]
                lines = []
            if lines:  # calls without results: the assistant's words alone, as before
                turns.append(("assistant", "\n".join(lines)))
        elif message.role == "tool":
            if id(message) in told:
                continue
            name = message.name or names.get(message.tool_call_id or "", "call")
            verb = "failed with" if message.is_error else "returned"
            turns.append(("tool", f"The tool {name} {verb}: {message.content}"))
        else:
            turns.append((message.role, message.content))
    manner = f"as {answer_as}" if answer_as else "in plain language"
    if messages and messages[-1].role == "tool":
        # Quoting the question keeps the answer on it when the history holds earlier questions.
        question = next((m.content for m in reversed(messages) if m.role == "user"), "")
        ask = f'Now answer my question "{question}" {manner}.' if question else f"Now answer {manner}."
        turns.append(("user", ask))
    elif answer_as and turns and turns[-1][0] == "user":
        turns[-1] = ("user", f"{turns[-1][1]}\nAnswer {manner}.")
    return Prompt.join([_turn("system", system), *(_turn(role, text) for role, text in turns), _open_turn("assistant")])
