"""The ask-or-call rule: a call whose required values nobody gave is not sent; the answer asks for them.

After the model proposes a call, each required argument must have been *given*: the user said it, the
caller's instructions or an earlier tool result hold it (:func:`~hammer_plugins.slot_filling.values.given_text`),
or the schema has a default for it. The check is slot filling's grounding check
(:func:`~hammer_plugins.slot_filling.values.ground_call`, the same one ``SlotFiller(grounding="enforce")`` uses):
one implementation. What a call that fails it becomes is ``on_missing`` (the engine's setting, or the request's):

* ``"ask"``: the calls are held back as ``HammerResponse.pending_calls`` (each with the values that stand and
  its ``missing`` names) and the answer is a question naming each missing value, in the user's language
  (:mod:`~hammer_plugins.slot_filling.questions`). The next user turn completes it: the model proposes again,
  a pending call's values stand unless the user corrects them, and a call to another tool (or a refusal)
  drops it, as a change of intent.
* ``"call"``: sent as the model wrote it (the rule is off).
* ``"error"``: :class:`MissingArgumentsError`.

Values nobody gave in optional parameters are dropped from the call in ``"ask"`` and ``"error"`` too: the
tool's own default applies instead of an invented value.

Example:
    >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend
    >>> tool = {"name": "pay_fine", "parameters": {"type": "object", "properties": {
    ...     "city": {"type": "string", "description": "Violating city"},
    ...     "plate": {"type": "string", "description": "License plate number"}}, "required": ["city", "plate"]}}
    >>> engine = HammerEngine(backend=ScriptedBackend([
    ...     '[{"name": "pay_fine", "arguments": {"city": "Guangzhou", "plate": "ABC123"}}]',
    ...     '[{"name": "pay_fine", "arguments": {"city": "Guangzhou", "plate": "D456"}}]']), on_missing="ask")
    >>> history = [Message.user("Pay my traffic fine in Guangzhou")]
    >>> first = engine.generate(history, [tool])
    >>> first.text, first.pending_calls[0].arguments, first.tool_calls
    ('Please provide the license plate number.', {'city': 'Guangzhou'}, [])
    >>> history += [Message.assistant(first.text).model_copy(update={"pending_calls": first.pending_calls}),
    ...             Message.user("It is D456")]
    >>> engine.generate(history, [tool]).tool_calls[0].arguments
    {'city': 'Guangzhou', 'plate': 'D456'}
"""

from __future__ import annotations

from collections.abc import Sequence

from hammer_plugins.engine.planning import Plan
from hammer_plugins.output.response import HammerResponse
from hammer_plugins.slot_filling.questions import language_of, missing_question
from hammer_plugins.slot_filling.values import clean_arguments, given_text, ground_call
from hammer_plugins.tools.definition import Tool
from hammer_plugins.values.calls import PendingCall, ToolCall
from hammer_plugins.values.errors import HammerError
from hammer_plugins.values.messages import Message


class MissingArgumentsError(HammerError):
    """Raised under ``on_missing="error"`` when a proposed call lacks required values nobody gave.

    ``pending_calls`` holds the calls with the values that stand and, on each, what is ``missing``.

    Example:
        >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend
        >>> tool = {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}},
        ...                                     "required": ["a"]}}
        >>> engine = HammerEngine(backend=ScriptedBackend(['[{"name": "f", "arguments": {"a": "xyz"}}]']))
        >>> try:
        ...     engine.generate([Message.user("run f")], [tool], on_missing="error")
        ... except MissingArgumentsError as exc:
        ...     print(exc.pending_calls[0].missing)
        ['a']
    """

    def __init__(self, message: str, pending_calls: Sequence[PendingCall]) -> None:
        super().__init__(message)
        self.pending_calls = list(pending_calls)


def previous_pending(messages: Sequence[Message]) -> list[PendingCall]:
    """The calls the last answer held back, while only user turns followed it, or the results of the calls
    that answer sent beside them (parallel calls, some held: the held ones still wait for their values). A
    tool result for no call of that answer, or a new instruction, means the ask was settled otherwise.

    Example:
        >>> ask = Message.assistant("Which city?").model_copy(update={"pending_calls": [PendingCall(name="f")]})
        >>> [c.name for c in previous_pending([Message.user("go"), ask, Message.user("Paris")])]
        ['f']
        >>> went = ToolCall(name="g", arguments={}, id="c1")
        >>> mixed = ask.model_copy(update={"tool_calls": [went]})
        >>> [c.name for c in previous_pending([Message.user("go"), mixed, Message.tool("ok", tool_call_id="c1")])]
        ['f']
    """
    results: set[str | None] = set()
    for message in reversed(messages):
        if message.role == "assistant":
            sent = {call.id for call in message.tool_calls}
            return list(message.pending_calls) if results <= sent else []
        if message.role == "tool":
            results.add(message.tool_call_id)
        elif message.role != "user":
            return []
    return []


def carry_pending(plan: Plan, response: HammerResponse) -> HammerResponse:
    """The answer after the results of calls that went out beside held ones: the held calls it does not settle
    still wait, so they ride on it and its text ends with the question for them (after the prose, which may
    have streamed: the question is what is left to show). Without this the next user turn, which answers the
    question, found no pending call to complete."""
    if not plan.holds_calls or not plan.messages or plan.messages[-1].role != "tool":
        return response
    settled = {c.name for c in response.tool_calls} | {p.name for p in response.pending_calls}
    waiting = [p for p in previous_pending(plan.messages) if p.name not in settled]
    if not waiting or response.kind not in ("text", "tool_calls"):
        return response
    question = _question(plan, [*response.pending_calls, *waiting])
    prose = response.text if response.kind == "text" and not response.pending_calls else ""
    return response.model_copy(update={"pending_calls": [*response.pending_calls, *waiting],
                                       "text": f"{prose.rstrip()}\n\n{question}" if prose.strip() else question})


def hold(plan: Plan, call: ToolCall) -> PendingCall:
    """``call`` held to what was given in ``plan``'s conversation: the values that stand and what is missing.

    A pending call of the same tool from the last answer lends its values (they were given then); the
    model's new value for one replaces it when somebody gave the new one (the user's correction).
    """
    tool = _tool(plan.binding.tools, call.name)
    if tool is None:  # resolve() already made a call to an unknown tool invalid; nothing to hold it to
        return PendingCall(name=call.name, arguments=dict(call.arguments), id=call.id)
    earlier = next((p for p in previous_pending(plan.messages) if p.name == call.name), None)
    accepted = dict(earlier.arguments) if earlier else {}
    said = given_text(plan.messages)
    grounding = ground_call(tool, {**accepted, **clean_arguments(call.arguments)}, said, accepted)
    arguments = dict(grounding.arguments)
    for key in grounding.ungrounded:  # a "correction" nobody gave: the value given earlier stands
        if key in accepted:
            arguments[key] = accepted[key]
    ordered = {k: arguments[k] for k in tool.properties if k in arguments}
    ordered |= {k: v for k, v in arguments.items() if k not in ordered}
    return PendingCall(name=call.name, arguments=ordered, id=earlier.id if earlier else call.id,
                       missing=[k for k in tool.required if k not in ordered])


def stands(plan: Plan, call: ToolCall) -> ToolCall | None:
    """The call as it may go out now (values nobody gave dropped), or None when it lacks required values:
    what a streamed call is checked against before it is sent mid-stream."""
    held = hold(plan, call)
    if held.missing:
        return None
    return call.model_copy(update={"arguments": held.arguments, "id": held.id})


def ask_or_call(plan: Plan, response: HammerResponse) -> HammerResponse:
    """The rule on a parsed answer: calls whose required values were all given go out (values nobody gave
    in optional parameters dropped); those that lack one are held back as ``pending_calls`` and the answer's
    text asks for their values (``"ask"``; beside the calls that go out, when some do), or
    :class:`MissingArgumentsError` is raised (``"error"``). ``"call"``: the answer as it is."""
    if not plan.holds_calls or response.kind != "tool_calls" or not response.tool_calls:
        return response
    held = [hold(plan, call) for call in response.tool_calls]
    # A call that completes one the last answer held back keeps its id: the call the ask announced goes out.
    calls = [call.model_copy(update={"arguments": p.arguments, "id": p.id})
             for call, p in zip(response.tool_calls, held, strict=True) if not p.missing]
    if len(calls) == len(held):
        return response.model_copy(update={"tool_calls": calls})
    if plan.on_missing == "error":
        missing = "; ".join(f"{p.name}: {', '.join(p.missing)}" for p in held if p.missing)
        raise MissingArgumentsError(f"the model's call lacks required values nobody gave ({missing}). Fix: say "
                                    "them in the question, or use on_missing='ask'", held)
    pending = [p for p in held if p.missing]
    question = _question(plan, pending)
    if calls:  # parallel calls, some complete: those go out (they may have streamed already), the rest is asked for
        return response.model_copy(update={"tool_calls": calls, "pending_calls": pending, "text": question})
    return response.model_copy(update={
        "kind": "text", "tool_calls": [], "pending_calls": pending, "text": question,
        "finish_reason": "stop" if response.finish_reason == "tool_calls" else response.finish_reason})


def _question(plan: Plan, pending: Sequence[PendingCall]) -> str:
    """The question naming each missing value of ``pending``, in the language of the user's messages."""
    tools = [(tool, p.missing) for p in pending if (tool := _tool(plan.binding.tools, p.name)) is not None]
    users = "\n".join(m.content for m in plan.messages if m.role == "user")
    return missing_question(tools, language_of(users))


def _tool(tools: Sequence[Tool], name: str) -> Tool | None:
    return next((t for t in tools if t.name == name), None)


__all__ = ["MissingArgumentsError", "ask_or_call", "carry_pending", "hold", "previous_pending", "stands"]
