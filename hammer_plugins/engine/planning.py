"""Planning one call: every argument validated, the prompt rendered and fitted, the grammar chosen.

A :class:`Plan` is what the turn rules (:mod:`hammer_plugins.engine.turn`) run: the conversation,
the bound tools, the normalized ``tool_choice``, the first pass's prompt, grammar and settings.
Bad arguments raise here, at the call, before any generation.

Example:
    >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend
    >>> from hammer_plugins.engine.request import EngineRequest, OnMissing
    >>> engine = HammerEngine(backend=ScriptedBackend([]))
    >>> request = EngineRequest.of([Message.user("hi")], [{"name": "ping", "parameters": {}}], "ping")
    >>> plan = make_plan(engine, request)
    >>> plan.tool_choice, plan.parallel, plan.grammar is not None
    ('ping', False, True)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from hammer_plugins.backends.base import GenerationSettings
from hammer_plugins.engine.binding import ToolBinding
from hammer_plugins.engine.core import EngineCore
from hammer_plugins.engine.request import EngineRequest, OnMissing
from hammer_plugins.engine.rules import check_messages, place_tool_error, resolve_tool_choice
from hammer_plugins.engine.tool_selection import matches_nothing, offer_tools
from hammer_plugins.grammar.builder import Grammar, build_json_grammar
from hammer_plugins.output.record import PassRecord
from hammer_plugins.prompt.render import chat_head_chars, describe_answer, render_chat, render_prompt, system_turns_chars
from hammer_plugins.tools.limits import schema_limits
from hammer_plugins.values.agent_loop import after_tool_results, called_tools, tool_rounds
from hammer_plugins.values.errors import ContextWindowExceededError, RequestError, SchemaConversionError
from hammer_plugins.values.messages import Message

MIN_ANSWER_TOKENS = 16


@dataclass
class Plan:
    messages: list[Message]
    binding: ToolBinding
    tool_choice: str
    prompt: str
    grammar: Grammar | None
    settings: GenerationSettings
    parallel: bool = True
    fitted: bool = True  # max_tokens already checked against the context window
    rounds_spent: bool = False  # this agent has made max_tool_rounds rounds of calls in this turn
    answer_as: str | None = None  # the response format, described for the answer pass's prompt
    answer_grammar: Grammar | None = None  # the response format's grammar for the answer pass
    offered: tuple[str, ...] | None = None  # the tools a selection offered (None: every tool given)
    gated: bool = False  # the relevance gate found no tool sharing a word with the question: refuse unrun
    widen: Callable[[], Plan] | None = None  # the plan offering the selector's reserve, for one try after []
    widened_to: Plan | None = None  # set when that plan ran: its offer is the answer's
    # What a call lacking a required value nobody gave becomes (engine/missing.py); None (a plan built by
    # hand): the model's calls as they are, the same as "call".
    on_missing: OnMissing | None = None
    # Each pass as it ran, when the request asked for the record (record_passes); None: not kept.
    passes: list[PassRecord] | None = None

    @property
    def holds_calls(self) -> bool:
        """Whether the ask-or-call rule judges this plan's calls: ``on_missing`` "ask" or "error", and the model
        chose to call (``tool_choice="auto"``). A call the caller forced (``"required"``, a named tool: LangChain's
        structured output and agents' answer tools) is the caller's demand, and a question would break it."""
        return self.on_missing in ("ask", "error") and self.tool_choice == "auto"


def check_rounds(value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"max_tool_rounds must be a positive integer or None (no limit), got {value!r}")
    return value


def make_plan(engine: EngineCore, request: EngineRequest, *, fit: bool = True,
              offered: Sequence[str] | None = None) -> Plan:
    """The first pass of ``request``: held to the request's rules (:mod:`~hammer_plugins.engine.rules`), its tools
    bound and narrowed, its prompt rendered and (``fit``) fitted to the context window, its grammar chosen.
    ``offered``: the tools to offer instead of the selector's choice (the widening after a refusal)."""
    msgs = list(request.messages)
    check_messages(msgs)
    try:
        binding = engine.bind(request.tools, request.mask_names)
    except SchemaConversionError as exc:
        raise place_tool_error(exc, request.tools) from None
    names = [t.name for t in binding.tools]
    choice = resolve_tool_choice(request.tool_choice, names)
    forced, offered, widened = offered, None, None
    # Only a user's question is gated: after tool results the turn ends from them, and a forced choice calls.
    gate = engine.relevance_gate if request.relevance_gate is None else request.relevance_gate
    gated = (gate and choice == "auto" and bool(binding.tools) and not after_tool_results(msgs)
             and matches_nothing(binding, msgs))
    if binding.tools and choice != "none":
        # A large tool set: the prompt offers the tools that best match the conversation (tool_selection).
        budget = engine.tool_budget if request.tool_budget is None else check_budget(request.tool_budget)
        offer = offer_tools(binding, msgs, choice, list(request.pinned_tools), budget,
                            lambda subset: engine.bind(subset, request.mask_names), engine.tool_selector, forced,
                            engine.offer_memory)
        binding, offered, widened = offer.binding, offer.offered, offer.widened
    parallel = request.parallel_tool_calls
    if parallel is None:
        # A named tool choice forces that one tool: one call, as with_structured_output and
        # LangChain's standard tests read it (forced, a small model with nothing to pass may
        # otherwise list calls of it until max_tokens). parallel_tool_calls=True still allows more.
        parallel = choice in ("auto", "required", "none")
    settings = engine.settings.model_copy(update=request.sampling())
    use_grammar = engine.constrained if request.constrained is None else request.constrained
    response_format = request.response_format
    # A response format is the answer's shape once the tools are done (or when there are none):
    # the tool passes stay Hammer's call lists, and the answer pass writes JSON of the format.
    answer_as = describe_answer(response_format) if response_format is not None else None
    rounds_cap = engine.max_tool_rounds if request.max_tool_rounds == "default" else check_rounds(request.max_tool_rounds)
    spent = rounds_cap is not None and tool_rounds(msgs, set(names)) >= rounds_cap
    only: frozenset[str] = frozenset()
    if choice == "none":
        prompt = render_chat(msgs, answer_as=answer_as)
    else:
        rendered = [masked_message(m, binding) for m in msgs]
        prompt = render_prompt(rendered, binding.prompt_tools, engine.prompt_format, prefix=binding.prefix)
        if choice == "required" and spent and after_tool_results(msgs):
            # The rounds are spent but a call is required (an agent that ends by calling a tool):
            # it must be to a tool not called yet in this turn, or the agent would loop.
            only = frozenset(t.name for t in binding.tools) - called_tools(msgs)
        # The KV state worth keeping: the tools block and the caller's instructions, which an agent sends
        # unchanged on every turn and in every new session.
        settings.shared_prefix_chars = len(binding.prefix) + system_turns_chars(msgs, engine.prompt_format)
        if msgs[0].role == "system":
            # The answer pass after the tool results starts with the instructions as its system turn: kept
            # now, on first contact, the agent's second turn does not wait for them.
            chat = render_chat(msgs)
            settings.prefill = [chat.head(chat_head_chars(msgs))]
    if use_grammar and (choice != "none" or response_format is not None):
        engine.backend.prepare_grammar()  # before fitting loads the model, so that both run at once
    if fit:  # the async path fits with an awaited token count instead
        # Before any grammar is built: a prompt over the context window costs no grammar.
        settings.max_tokens = fit_tokens(engine, prompt, settings.max_tokens)
    with schema_limits(engine.schema_limits):
        answer_grammar = json_grammar(response_format) if response_format is not None and use_grammar else None
    if choice == "none":
        grammar = answer_grammar
    else:
        grammar = binding.grammar(choice, parallel, only, request.partial_calls) if use_grammar else None
    # Hammer's [] over a narrowed set may mean "none of these": the selector's reserve gets one try, when the
    # user asked (after tool results [] means done) and nothing forces a tool.
    widen = None
    if widened is not None and forced is None and choice == "auto" and not after_tool_results(msgs):
        widen = partial(make_plan, engine, request, fit=fit, offered=widened)
    return Plan(messages=msgs, binding=binding, tool_choice=choice, prompt=prompt, grammar=grammar,
                settings=settings, parallel=parallel, fitted=fit, rounds_spent=spent, answer_as=answer_as,
                answer_grammar=answer_grammar, offered=offered, gated=gated, widen=widen,
                on_missing=request.on_missing or engine.on_missing, passes=[] if request.record_passes else None)


def check_budget(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"tool_budget must be a whole number of tokens, 0 to offer every tool; got {value!r}")
    return value


def json_grammar(response_format: Mapping[str, Any]) -> Grammar:
    """The grammar of a response format's JSON; a schema that cannot be used is placed at ``("response_format",)``."""
    kind = response_format.get("type") if isinstance(response_format, Mapping) else None
    try:
        if kind == "json_object":
            return build_json_grammar(None)
        if kind == "json_schema":
            spec = response_format.get("json_schema", response_format)
            schema = spec.get("schema") if isinstance(spec, Mapping) else None
            if not isinstance(schema, Mapping):
                raise SchemaConversionError("response", "response_format.json_schema.schema",
                                            "response_format json_schema needs a 'schema' object",
                                            "pass {'type': 'json_schema', 'json_schema': {'name': ..., 'schema': {...}}}")
            return build_json_grammar(dict(schema), str(spec.get("name", "response")))
    except SchemaConversionError as exc:
        exc.loc = ("response_format",)
        raise
    raise RequestError(f"response_format type {kind!r} is not supported; use 'json_object' or 'json_schema'",
                       ("response_format", "type"), "unsupported_value")


def masked_message(message: Message, binding: ToolBinding) -> Message:
    if binding.mask is None or not message.tool_calls:
        return message
    return message.model_copy(update={"tool_calls": [binding.mask.mask_call(c) for c in message.tool_calls]})


def room(prompt_tokens: int, max_tokens: int, window: int) -> int:
    """``max_tokens`` shrunk to the room the prompt leaves in the window; too little room raises."""
    left = window - prompt_tokens
    if left < min(max_tokens, MIN_ANSWER_TOKENS):
        raise ContextWindowExceededError(prompt_tokens, max_tokens, window)
    return min(max_tokens, left)


def fit_tokens(engine: EngineCore, prompt: str, max_tokens: int) -> int:
    """Check the prompt fits; shrink ``max_tokens`` to the room left when that is enough."""
    window = engine.backend.context_window
    return room(engine.backend.count_tokens(prompt), max_tokens, window)


async def afit_tokens(engine: EngineCore, prompt: str, max_tokens: int) -> int:
    """:func:`fit_tokens` on the backend's async half: loads and counts without blocking the event loop."""
    backend = engine.backend
    await backend.aload()
    return room(await backend.acount_tokens(prompt), max_tokens, backend.context_window)
