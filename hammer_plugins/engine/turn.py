"""The turn rules: one call's passes, free of I/O, from the plan to the final answer.

:func:`run` is the logic of :meth:`~hammer_plugins.HammerEngine.stream`: it yields the stream's
events (:mod:`hammer_plugins.output.events`) for the caller and requests (:class:`Fit`, :class:`Generate`,
``NEXT``) that a driver (:mod:`hammer_plugins.engine.drivers`) answers from the backend, so the sync
and the async paths share every rule: when a refusal is answered in prose, when the tools are
offered again after results (:mod:`hammer_plugins.values.agent_loop`), which streamed calls stand, how a cut
or invalid answer reads.

Example:
    >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend
    >>> from hammer_plugins.engine.drivers import drive
    >>> from hammer_plugins.engine.planning import make_plan
    >>> from hammer_plugins.engine.request import EngineRequest
    >>> engine = HammerEngine(backend=ScriptedBackend(["[]"]))
    >>> plan = make_plan(engine, EngineRequest.of([Message.user("joke")], [{"name": "ping", "parameters": {}}]))
    >>> last_response(drive(engine, run(engine, plan, None))).kind
    'refusal'
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel

from hammer_plugins.backends.base import GenerationSettings
from hammer_plugins.engine.core import EngineCore, RefusalMode
from hammer_plugins.engine.missing import ask_or_call, carry_pending, stands
from hammer_plugins.engine.planning import Plan
from hammer_plugins.grammar.builder import Grammar
from hammer_plugins.grammar.keyword_check import keyword_violation
from hammer_plugins.output.call_scanner import CallScanner
from hammer_plugins.output.decoding import Decoding
from hammer_plugins.output.events import StreamEvent, TextDelta, ToolCallDelta
from hammer_plugins.output.parsing import items_to_calls, parse_output, parse_stopped_list
from hammer_plugins.output.record import PassRecord, Stage
from hammer_plugins.output.response import HammerResponse, Usage
from hammer_plugins.output.timings import Timings
from hammer_plugins.prompt.render import chat_head_chars, render_chat
from hammer_plugins.values.agent_loop import after_tool_results, answered_calls, call_key
from hammer_plugins.values.calls import InvalidToolCall, ToolCall
from hammer_plugins.values.errors import HammerError


class RefusalError(HammerError):
    """Raised for Hammer's ``[]`` when ``on_refusal="raise"``.

    Example:
        >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend
        >>> engine = HammerEngine(backend=ScriptedBackend(["[]"]), on_refusal="raise")
        >>> try:
        ...     engine.generate([Message.user("Tell me a joke")], tools=[{"name": "ping", "parameters": {}}])
        ... except RefusalError:
        ...     print("refused")
        refused
    """


@dataclass(frozen=True)
class Fit:
    """:func:`run` asks its driver for ``max_tokens`` fitted to the context window."""

    prompt: str
    max_tokens: int


@dataclass(frozen=True)
class Generate:
    """:func:`run` asks its driver to start a generation; the reply is its first chunk."""

    prompt: str
    settings: GenerationSettings
    grammar: Grammar | None


NEXT = object()  # run asks for the next chunk of the running generation
END = object()  # the driver's reply once the generation has ended


def response_of(core: Generator[Any, Any, None]) -> Generator[Any, Any, HammerResponse]:
    """Run a core, passing its requests to the driver and keeping its events: returns its response."""
    final: HammerResponse | None = None
    reply: Any = None
    while True:
        try:
            item = core.send(reply)
        except StopIteration:
            assert final is not None
            return final
        reply = None
        if isinstance(item, HammerResponse):
            final = item
        elif not isinstance(item, (TextDelta, ToolCallDelta)):
            reply = yield item


def run(engine: EngineCore, plan: Plan, on_refusal: RefusalMode | None) -> Generator[Any, Any, None]:
    """The logic of :meth:`~hammer_plugins.HammerEngine.stream`, free of I/O: it yields events for the
    caller and requests (:class:`Fit`, :class:`Generate`, ``NEXT``) that a driver
    (:mod:`hammer_plugins.engine.drivers`) answers from the backend, so the sync and the async
    paths share every rule. The final response says which tools a selection offered."""
    def finish(response: HammerResponse) -> None:  # what the final response says of the whole turn
        shown = plan.widened_to or plan
        if shown.offered is not None:
            response.offered_tools = list(shown.offered)
        if plan.passes is not None:
            response.passes = list(plan.passes)
        # After the results of parallel calls that went out beside held ones: the held ones still wait.
        carried = carry_pending(plan, response)
        response.pending_calls, response.text = carried.pending_calls, carried.text

    yield from _relay(_passes(engine, plan, on_refusal), finish)


def _passes(engine: EngineCore, plan: Plan, on_refusal: RefusalMode | None) -> Generator[Any, Any, None]:
    """:func:`run`'s passes: the tools pass, then the answer pass where the rules call for one."""
    started = time.perf_counter()
    if not plan.fitted:  # the async path counts tokens with an awaited call
        plan.settings.max_tokens = yield Fit(plan.prompt, plan.settings.max_tokens)
    ending_turn = plan.tool_choice == "auto" and after_tool_results(plan.messages)
    if ending_turn and plan.rounds_spent:
        yield from answer(engine, plan, HammerResponse(kind="text", model=engine.backend.model_name), started)
        return
    if plan.tool_choice == "none":
        yield from answer(engine, plan, HammerResponse(kind="text", model=engine.backend.model_name), started,
                                prompt=plan.prompt, grammar=plan.grammar)
        return
    answered = answered_calls(plan.messages) if ending_turn else frozenset()
    raw_parts: list[str] = []
    usage = Usage()
    finish = "stop"
    timings = Timings()
    decoding = Decoding()
    scanner = CallScanner() if plan.grammar is not None else None
    streamed: list[ToolCall] = []
    if plan.gated:  # no tool shares a word with the question: Hammer's refusal, without running the model
        raw_parts.append("[]")
        decoding = Decoding(relevance_gated=True)
        chunk = END
    else:
        chunk = yield Generate(plan.prompt, plan.settings, plan.grammar)
    while chunk is not END:
        if chunk.text:
            raw_parts.append(chunk.text)
            yield TextDelta(chunk.text)
            for item in scanner.feed(chunk.text) if scanner else []:
                calls, _ = items_to_calls([item], "")
                resolved = resolve(plan, calls[0], "") if calls else None
                if isinstance(resolved, ToolCall) and plan.holds_calls:
                    # The ask-or-call rule: a call goes out mid-stream only as it will stand at the end (each
                    # parallel call is judged alone, so a complete one streams while another is held).
                    resolved = stands(plan, resolved)
                if isinstance(resolved, ToolCall) and call_key(resolved) not in answered and (
                        plan.parallel or not streamed):
                    streamed.append(resolved)
                    yield ToolCallDelta(len(streamed) - 1, resolved)
        if chunk.usage is not None:
            usage = chunk.usage.model_copy()
            finish = chunk.finish_reason or "stop"
            timings, decoding = chunk.timings.model_copy(), chunk.decoding.model_copy()
        chunk = yield NEXT
    note(plan, "tools", plan.prompt, usage if not plan.gated else None, finish)
    raw = "".join(raw_parts)
    response = parsed_response(engine, plan, raw, usage, finish, timings, decoding)
    if answered:
        response.tool_calls = [c for c in response.tool_calls if call_key(c) not in answered]
        if not response.tool_calls and response.kind == "tool_calls":
            response.kind = "refusal"  # only repeats: nothing more to call
    if not plan.parallel:
        response.tool_calls = response.tool_calls[:1]
    response = ask_or_call(plan, response)  # before the ids: a streamed call was sent as it stands
    for index, call in enumerate(response.tool_calls[: len(streamed)]):
        if call_key(call) == call_key(streamed[index]):
            call.id = streamed[index].id
    if response.kind == "refusal" and plan.widen is not None and not plan.gated and plan.answer_as is None:
        # [] over a narrowed set: the tools left out get one try (the widened plan has no reserve of its own).
        plan.widened_to = plan.widen()
        plan.widened_to.passes = plan.passes  # one record: this pass, then the widened one
        yield from _with_usage(_passes(engine, plan.widened_to, on_refusal), usage)
        return
    if response.kind == "refusal" and (ending_turn or plan.answer_as is not None):
        # After tool results, [] means "done": answer from the results, whatever on_refusal says.
        # With a response format the agent is done too: the answer is the structured one.
        yield from answer(engine, plan, response.model_copy(update={"kind": "text"}), started)
        return
    mode = on_refusal or engine.on_refusal
    if response.kind == "refusal" and mode == "raise":
        raise RefusalError(f"the model found no suitable tool (answered '[]'); raw output: {raw!r}")
    if response.kind == "refusal" and mode == "answer":
        yield from answer(engine, plan, response, started)
        return
    response.timings.engine_total = time.perf_counter() - started
    yield response

def _relay(core: Generator[Any, Any, None], edit: Callable[[HammerResponse], None]) -> Generator[Any, Any, None]:
    """``core``'s items and its driver's replies, passed through; each response ``edit``-ed on its way out."""
    reply: Any = None
    while True:
        try:
            item = core.send(reply)
        except StopIteration:
            return
        if isinstance(item, HammerResponse):
            edit(item)
        reply = yield item


def _with_usage(core: Generator[Any, Any, None], spent: Usage) -> Generator[Any, Any, None]:
    """``core``'s items, its final responses counting ``spent`` too (the tokens of a pass before it)."""

    def add(response: HammerResponse) -> None:
        response.usage = spent + response.usage

    return _relay(core, add)


def answer(engine: EngineCore, plan: Plan, base: HammerResponse, started: float, prompt: str | None = None,
            grammar: Grammar | None = None) -> Generator[Any, Any, None]:
    """A tool-free pass; its answer (prose, or the JSON of the response format) becomes ``text`` of
    ``base`` (usage of both passes summed)."""
    if prompt is None:
        prompt = render_chat(plan.messages, answer_as=plan.answer_as)
        grammar = plan.answer_grammar
    settings = plan.settings.model_copy()
    # The chat's system turn (the caller's instructions) is what every answer pass of an agent shares.
    settings.shared_prefix_chars = chat_head_chars(plan.messages)
    settings.max_tokens = yield Fit(prompt, settings.max_tokens)
    parts: list[str] = []
    usage = base.usage
    spent: Usage | None = None  # this pass's own tokens, for its record
    finish = "stop"
    timings, decoding = base.timings, base.decoding
    pending = ""  # whitespace held back until more text follows, so deltas add up to the stripped text
    chunk = yield Generate(prompt, settings, grammar)
    while chunk is not END:
        if chunk.text:
            parts.append(chunk.text)
            text = pending + chunk.text
            if not "".join(parts[:-1]).strip():
                text = text.lstrip()
            body = text.rstrip()
            pending = text[len(body):]
            if body:
                yield TextDelta(body, channel="prose")
        if chunk.usage is not None:
            usage, spent = usage + chunk.usage, chunk.usage
            finish = chunk.finish_reason or "stop"
            timings, decoding = overlaid(timings, chunk.timings), overlaid(decoding, chunk.decoding)
        chunk = yield NEXT
    note(plan, "answer", prompt, spent or Usage(), finish)
    raw = "".join(parts)
    text = raw.strip()
    if base.kind == "refusal" and not text:
        text = engine.refusal_text
    timings = overlaid(timings, Timings(engine_total=time.perf_counter() - started))
    update: dict[str, Any] = {"text": text, "usage": usage, "finish_reason": finish, "timings": timings,
                              "decoding": decoding}
    if base.kind == "text":
        update["raw"] = raw
    yield base.model_copy(update=update)


def note(plan: Plan, stage: Stage, prompt: str, usage: Usage | None, finish: str) -> None:
    """Record a pass as it ran, when the request asked (``plan.passes``); ``usage`` None: the model did not run."""
    if plan.passes is None:
        return
    tools = plan.binding.tools if stage == "tools" else []
    shown = dict(zip([t.name for t in plan.binding.tools], [p.name for p in plan.binding.prompt_tools], strict=True))
    plan.passes.append(PassRecord(
        stage=stage, prompt=prompt, offered_tools=[t.name for t in tools],
        shown_names={t.name: shown[t.name] for t in tools}, model_ran=usage is not None,
        gated=usage is None and plan.gated, prompt_tokens=usage.prompt_tokens if usage is not None else None,
        completion_tokens=usage.completion_tokens if usage is not None else None,
        finish_reason=finish if usage is not None else None))


def resolve(plan: Plan, call: ToolCall, raw: str) -> ToolCall | InvalidToolCall:
    """Unmask a parsed call, check it names a bound tool and its arguments keep the schema keywords
    the grammar may not express (:func:`~hammer_plugins.grammar.keyword_check.keyword_violation`)."""
    real: ToolCall | InvalidToolCall = plan.binding.mask.unmask(call) if plan.binding.mask else call
    if not isinstance(real, ToolCall):
        return real
    tool = next((t for t in plan.binding.tools if t.name == real.name), None)
    if tool is None:
        return InvalidToolCall(raw=raw, name=real.name, id=real.id,
                               arguments=json.dumps(real.arguments, ensure_ascii=False, default=str),
                               reason=f"the model called {real.name!r}, which is not a bound tool")
    broken = keyword_violation(tool.parameters, real.arguments)
    if broken is not None:
        path, keyword, detail = broken
        return InvalidToolCall(raw=raw, name=real.name, id=real.id,
                               arguments=json.dumps(real.arguments, ensure_ascii=False, default=str),
                               reason=f"argument {path!r} breaks the schema keyword {keyword!r}: {detail}")
    return real

ModelT = TypeVar("ModelT", bound=BaseModel)


def overlaid(base: ModelT, top: ModelT) -> ModelT:
    """``base`` with the fields ``top`` set (measured, counted, flagged) taking their place: a second pass's
    timings and decoding over the first's."""
    return base.model_copy(update=top.model_dump(exclude_defaults=True))


def parsed_response(engine: EngineCore, plan: Plan, raw: str, usage: Usage, finish: str,
                    timings: Timings, decoding: Decoding) -> HammerResponse:
    parse_started = time.perf_counter()
    # The loop guard stopped a call list that kept repeating itself, or max_tokens cut it: the
    # complete calls made so far stand and the cut tail is dropped (see _cut_or_invalid_text).
    cut = finish == "length" and not decoding.loop_guard_stopped
    parsed = parse_stopped_list(raw) if decoding.loop_guard_stopped or cut else parse_output(raw)
    if cut and parsed.kind == "tool_calls":
        decoding = decoding.model_copy(update={"length_stopped": True})
    calls: list[ToolCall] = []
    invalid = list(parsed.invalid_tool_calls)
    for call in parsed.tool_calls:
        real = resolve(plan, call, raw)
        (calls if isinstance(real, ToolCall) else invalid).append(real)  # type: ignore[arg-type]
    kind = parsed.kind
    if parsed.kind == "tool_calls" and not calls:
        kind = "invalid"
    text = parsed.text
    if kind == "refusal":
        text = engine.refusal_text
    if kind == "invalid" and not text.strip():
        text = cut_or_invalid_text(invalid, finish, plan.settings.max_tokens)
    response = HammerResponse(
        kind=kind, tool_calls=calls, invalid_tool_calls=invalid, text=text, raw=raw, usage=usage,
        finish_reason="tool_calls" if calls and finish == "stop" else finish,
        model=engine.backend.model_name, timings=timings, decoding=decoding,
    )
    response.timings.parse = time.perf_counter() - parse_started
    return response


def last_response(events: Iterator[StreamEvent]) -> HammerResponse:
    """The :class:`HammerResponse` that ends a stream of events (every stream ends with one)."""
    final: HammerResponse | None = None
    for event in events:
        if isinstance(event, HammerResponse):
            final = event
    assert final is not None
    return final


def cut_or_invalid_text(invalid: Sequence[InvalidToolCall], finish: str, max_tokens: int) -> str:
    """What an answer with no valid call says, so that no agent turn ends with an empty message.

    An agent loop (LangChain's ``create_agent``, LlamaIndex's ``FunctionAgent``) ends its turn on a
    message without valid calls; the invalid calls ride along but are not shown, so the text names
    the failure and the fix. Complete calls before a cut are kept (:func:`parsed_response`):
    this text is for output that has none.

    Example:
        >>> from hammer_plugins.values.calls import InvalidToolCall
        >>> cut_or_invalid_text([InvalidToolCall(raw="[{", name="f", reason="cut")], "length", 30)[:60]
        'No tool was called: the call to f was cut off at max_tokens='
    """
    names = sorted({c.name for c in invalid if c.name})
    target = f"the call to {', '.join(names)}" if names else "the tool call"
    if finish == "length":
        return (f"No tool was called: {target} was cut off at max_tokens={max_tokens} before it was "
                "complete. Raise max_tokens, or ask for fewer things at once.")
    reasons = "; ".join(dict.fromkeys(c.reason for c in invalid if c.reason)) or "the output was not a valid call"
    return f"No tool was called: {target} was not valid ({reasons})."
