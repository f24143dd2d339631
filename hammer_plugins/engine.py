"""The engine: tools and messages in, tool calls / refusal / text out, on any backend.

Everything the LangChain and LlamaIndex adapters share lives here: tool conversion, prompt
rendering, ``tool_choice`` handling, constrained decoding, masking, parsing, refusal handling,
context checks, streaming and async.

Example:
    >>> from hammer_plugins import HammerEngine, Message
    >>> from hammer_plugins.backends.scripted import ScriptedBackend
    >>> engine = HammerEngine(backend=ScriptedBackend(["[]"]))
    >>> engine.generate([Message.user("Tell me a joke")], tools=[{"name": "get_weather",
    ...     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]).kind
    'refusal'
"""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .agent_turn import after_tool_results, answered_calls, call_key, called_tools, tool_rounds
from .backends.base import Backend, GenerationCancelled, GenerationChunk, GenerationSettings
from .calls import InvalidToolCall, ToolCall
from .errors import ContextWindowExceededError, HammerError, SchemaConversionError, UnknownToolError
from .grammar import Grammar, SizedCache, build_grammar, build_json_grammar
from .masking import NameMask
from .messages import Message, to_message
from .model_source import best_pulled_preset
from .parsing import items_to_calls, parse_output, parse_stopped_list
from .presets import find_preset
from .prompt import PROMPT_FORMATS, PromptFormat, describe_answer, render_chat, render_prefix, render_prompt
from .response import DEFAULT_REFUSAL_TEXT, HammerResponse, Usage
from .schema_keywords import keyword_violation
from .slot_filling import SlotFiller, SnapshotRequest
from .streaming import CallScanner
from .tools import SchemaLimits, Tool, current_limits, relaxed_tool, schema_limits, to_tools

RefusalMode = Literal["message", "answer", "raise"]
# One round of (possibly parallel) calls per user request, as in Hammer's training data; the
# stand-in default model chains spurious calls on results when allowed more (measured).
DEFAULT_MAX_TOOL_ROUNDS = 1
_MIN_ANSWER_TOKENS = 16


def _model_prompt_format(model_path: str | Path | None, model: str | None, backend: str | Backend) -> PromptFormat:
    """The prompt layout of the model these settings name: a preset's (Hammer 2.0/1.0 differ), else 2.1."""
    if model_path is not None or not isinstance(backend, str) or backend == "server":
        return "hammer2.1"
    preset = find_preset(model) if model else best_pulled_preset() if backend != "transformers" else None
    return preset.prompt_format if preset else "hammer2.1"  # type: ignore[return-value]


def _check_rounds(value: int | None) -> int | None:
    if value is not None and (not isinstance(value, int) or value < 1):
        raise ValueError(f"max_tool_rounds must be a positive integer or None (no limit), got {value!r}")
    return value


class RefusalError(HammerError):
    """Raised for Hammer's ``[]`` when ``on_refusal="raise"``.

    Example:
        >>> from hammer_plugins import ScriptedBackend
        >>> engine = HammerEngine(backend=ScriptedBackend(["[]"]), on_refusal="raise")
        >>> try:
        ...     engine.generate([Message.user("Tell me a joke")], tools=[{"name": "ping", "parameters": {}}])
        ... except RefusalError:
        ...     print("refused")
        refused
    """


@dataclass(frozen=True)
class TextDelta:
    """A streamed piece of the model's output.

    ``channel`` is ``"call"`` for the output of a pass that offers tools (Hammer's call syntax, or
    whatever the model wrote instead) and ``"prose"`` for a tool-free answer. Prose deltas are
    trimmed like the final ``text``, so they add up to it exactly.

    Example:
        >>> from hammer_plugins import ScriptedBackend
        >>> engine = HammerEngine(backend=ScriptedBackend(["Hello!"]))
        >>> [e.text for e in engine.stream([Message.user("hi")]) if isinstance(e, TextDelta)]
        ['Hello!']
    """

    text: str
    channel: Literal["call", "prose"] = "call"


@dataclass(frozen=True)
class ToolCallDelta:
    """A tool call complete in the stream (constrained decoding only), before the answer ends.

    ``index`` is its position in the final response's ``tool_calls``, which reuses the same id.

    Example:
        >>> from hammer_plugins import ScriptedBackend
        >>> engine = HammerEngine(backend=ScriptedBackend(['[{"name": "ping", "arguments": {}}]']))
        >>> events = list(engine.stream([Message.user("ping")], tools=[{"name": "ping", "parameters": {}}]))
        >>> [(e.index, e.call.name) for e in events if isinstance(e, ToolCallDelta)]
        [(0, 'ping')]
    """

    index: int
    call: ToolCall


StreamEvent = TextDelta | ToolCallDelta | HammerResponse


def normalize_tool_choice(tool_choice: Any, tool_names: Sequence[str]) -> str:
    """Map every spelling users bring to ``"auto"``, ``"required"``, ``"none"`` or a tool name.

    Accepts ``None``/``"auto"``, ``"any"``/``"required"``/``True``, ``"none"``/``False``, a tool
    name, ``{"type": "function", "function": {"name": ...}}``, ``{"type": "tool", "name": ...}``
    and ``{"type": "auto" | "any" | "none"}``.

    Example:
        >>> normalize_tool_choice({"type": "function", "function": {"name": "ping"}}, ["ping"])
        'ping'
    """
    if tool_choice is None:
        return "auto"
    if tool_choice is True:
        return tool_names[0] if len(tool_names) == 1 else "required"
    if tool_choice is False:
        return "none"
    if isinstance(tool_choice, Mapping):
        function = tool_choice.get("function")
        if isinstance(function, Mapping) and function.get("name"):
            tool_choice = function["name"]
        elif tool_choice.get("name"):
            tool_choice = tool_choice["name"]
        elif tool_choice.get("type") in ("auto", "any", "none", "required"):
            tool_choice = tool_choice["type"]
        else:
            raise UnknownToolError(f"tool_choice {dict(tool_choice)!r} names no tool. Fix: use "
                                   "{'type': 'function', 'function': {'name': <tool>}}")
    if not isinstance(tool_choice, str):
        raise UnknownToolError(f"tool_choice {tool_choice!r} is not understood. Fix: pass 'auto', "
                               "'required', 'none' or a tool name")
    lowered = tool_choice.lower()
    if lowered in ("auto", "none", "required"):
        return lowered
    if lowered == "any":
        return "required"
    if tool_choice not in tool_names:
        raise UnknownToolError(
            f"tool_choice {tool_choice!r} is not among the bound tools {list(tool_names)}. Fix: pass one "
            "of those names, 'auto', 'required' or 'none'."
        )
    return tool_choice


@dataclass(frozen=True)
class ToolBinding:
    """Everything derived once from a tool set: the tools the prompt shows, masks, prefix, grammars."""

    tools: tuple[Tool, ...]
    prompt_tools: tuple[Tool, ...]
    mask: NameMask | None
    prefix: str
    prompt_format: str
    limits: SchemaLimits | None = None  # the budgets its grammars are built under (None: those in force)

    def grammar(self, tool_choice: str, parallel: bool, only: frozenset[str] = frozenset(),
                partial_calls: bool = False) -> Grammar:
        """The grammar for ``tool_choice``; ``only`` (real names) narrows the callable tools when not
        empty; ``partial_calls`` makes every parameter optional (a slot-filling snapshot)."""
        shown = tool_choice
        if self.mask is not None and tool_choice not in ("auto", "required"):
            shown = next(m for m, real in self.mask.function_names.items() if real == tool_choice)
        tools = self.prompt_tools
        if only:
            tools = tuple(p for p, t in zip(self.prompt_tools, self.tools, strict=True) if t.name in only)
        with schema_limits(self.limits):
            if partial_calls:
                tools = tuple(relaxed_tool(t) for t in tools)
            return _grammar_cached(tools, shown, parallel)


_SHARED_BACKENDS: dict[tuple[Any, ...], Backend] = {}
_SHARED_LOCK = threading.Lock()
# The grammars of recent tool sets, shared by every engine in the process: bounded by entries and by
# characters (keys and grammars together), so many large distinct tool sets cannot fill the memory.
GRAMMAR_CACHE_ENTRIES = 128
GRAMMAR_CACHE_CHARS = 64_000_000
_GRAMMARS: SizedCache[tuple[Any, ...], Grammar] = SizedCache(GRAMMAR_CACHE_ENTRIES, GRAMMAR_CACHE_CHARS)


def _grammar_cached(tools: tuple[Tool, ...], tool_choice: str, parallel: bool) -> Grammar:
    prints = tuple(t.fingerprint() for t in tools)
    key = (prints, tool_choice, parallel, current_limits())
    found = _GRAMMARS.get(key)
    if found is not None:
        return found
    grammar = build_grammar(list(tools), tool_choice, parallel)
    _GRAMMARS.put(key, grammar, sum(map(len, prints)) + len(grammar.gbnf) + len(grammar.lark))
    return grammar


class HammerEngine:
    """A Hammer model with its prompt, grammar, masking and parser: the framework-free core.

    Args:
        model_path: a ``.gguf`` file (llama.cpp) or checkpoint directory (transformers).
        model: a preset (``"hammer2.1-1.5b"``: its GGUF on llama.cpp, its checkpoint on transformers), a
            Hugging Face repo (``"owner/repo"``, ``"owner/repo:Q4_K_M"``, ``"owner/repo/file.gguf"``), a
            local directory or a ``.gguf`` path (see :mod:`hammer_plugins.model_source`).
        backend: ``"llama_cpp"`` (default), ``"transformers"``, ``"server"`` (an OpenAI-compatible
            inference server: pass ``base_url=``, and ``api_key=``, ``timeout=``, ... as for
            :class:`~hammer_plugins.backends.server.OpenAICompatibleBackend`), or a :class:`Backend` instance.
        prompt_format: ``"hammer2.1"``, ``"hammer2.0"`` or ``"hammer1.0"``; ``None`` (default): the
            layout of the model named (a Hammer 2.0 or 1.0 preset has its own), else ``"hammer2.1"``.
        constrained: constrain decoding with a grammar built from the tools (default on).
        mask_names: replace function and parameter names with opaque strings in the prompt.
        on_refusal: what ``[]`` becomes: ``"message"`` (a refusal text), ``"answer"`` (a second,
            tool-free pass answers in plain language), or ``"raise"`` (:class:`RefusalError`).
        max_tool_rounds: rounds of tool calls in one agent turn (since the last user message) after
            which the model answers from the results instead of being offered the tools again
            (``None``: no limit). See :mod:`hammer_plugins.agent_turn` for the end-of-turn rules.
        max_tokens, temperature, top_p, top_k, repeat_penalty, seed: sampling settings.
        loop_guard: close a string value the model repeats itself in (constrained local decoding;
            see :mod:`hammer_plugins.token_mask`). On by default.
        n_ctx, n_threads, n_gpu_layers: llama.cpp settings. device, dtype: transformers settings.
        prefix_cache: llama.cpp: keep the KV state of the tools prefix on disk, so a new process with
            the same model and tools skips evaluating it (``True``: ``$HAMMER_CACHE_DIR/prefix-kv``;
            a folder; ``False``: off). See :mod:`hammer_plugins.prefix_cache`.
        backend_kwargs: anything else for the backend constructor.

    Nothing is loaded until the first call (or :meth:`load`).

    Attributes:
        schema_limits: the budgets tool sets and response schemas are held to (size once ``$ref`` is
            inlined, depth, enums, grammar size and build time), a
            :class:`~hammer_plugins.tools.SchemaLimits`; ``None`` (default): the process default
            (``HAMMER_LIMIT_*`` environment variables, :func:`~hammer_plugins.tools.set_default_limits`).

    Example:
        >>> engine = HammerEngine()          # the embedded default model, loaded lazily
        >>> engine.prompt_format
        'hammer2.1'
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        model: str | None = None,
        *,
        backend: str | Backend = "llama_cpp",
        prompt_format: PromptFormat | None = None,
        constrained: bool = True,
        mask_names: bool = False,
        on_refusal: RefusalMode = "message",
        refusal_text: str = DEFAULT_REFUSAL_TEXT,
        max_tool_rounds: int | None = DEFAULT_MAX_TOOL_ROUNDS,
        max_tokens: int = 512,
        temperature: float = 0.0,
        top_p: float = 1.0,
        top_k: int = 0,
        repeat_penalty: float = 1.0,
        loop_guard: bool = True,
        seed: int | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        device: str = "auto",
        dtype: str = "auto",
        prefix_cache: bool | str | Path = False,
        **backend_kwargs: Any,
    ) -> None:
        prompt_format = prompt_format or _model_prompt_format(model_path, model, backend)
        if prompt_format not in PROMPT_FORMATS:
            raise ValueError(f"unknown prompt_format {prompt_format!r}; use one of {PROMPT_FORMATS}")
        if on_refusal not in ("message", "answer", "raise"):
            raise ValueError(f"on_refusal must be 'message', 'answer' or 'raise', got {on_refusal!r}")
        if isinstance(backend, str) and backend not in ("llama_cpp", "llama.cpp", "transformers", "server"):
            raise ValueError(f"unknown backend {backend!r}; use 'llama_cpp', 'transformers', 'server' or a Backend instance")
        self.model_path = model_path
        self.model = model
        self.backend_name = backend if isinstance(backend, str) else backend.name
        self._backend: Backend | None = backend if isinstance(backend, Backend) else None
        self.prompt_format: PromptFormat = prompt_format
        self.constrained = constrained
        self.mask_names = mask_names
        self.on_refusal: RefusalMode = on_refusal
        self.refusal_text = refusal_text
        self.max_tool_rounds = _check_rounds(max_tool_rounds)
        self.settings = GenerationSettings(max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                                           top_k=top_k, repeat_penalty=repeat_penalty, seed=seed,
                                           loop_guard=loop_guard)
        self._backend_options = {"n_ctx": n_ctx, "n_threads": n_threads, "n_gpu_layers": n_gpu_layers,
                                 "device": device, "dtype": dtype, "prefix_cache": prefix_cache, **backend_kwargs}
        # The budgets tool sets and response schemas are held to (None: the process default); see
        # SchemaLimits. An attribute, so set it after construction: engine.schema_limits = SchemaLimits(...).
        self.schema_limits: SchemaLimits | None = None
        # Tool sets bound recently: by entries and by characters (their fingerprints and prompt prefix).
        self._bindings: SizedCache[tuple[Any, ...], ToolBinding] = SizedCache(32, 32_000_000)
        self._create_lock = threading.Lock()

    # ------------------------------------------------------------- backend
    @property
    def backend(self) -> Backend:
        """The backend (created on first access; the model itself loads on first generation)."""
        if self._backend is None:
            with self._create_lock:
                if self._backend is None:
                    self._backend = self._make_backend()
        return self._backend

    def _make_backend(self) -> Backend:
        # One loaded model per configuration per process: many engines (e.g. every ChatHammer a
        # framework constructs) share it, and its lock serializes their calls.
        key = self._shared_key()
        with _SHARED_LOCK:
            backend = _SHARED_BACKENDS.get(key)
            if backend is None:
                backend = self._new_backend()
                _SHARED_BACKENDS[key] = backend
        return backend

    def _new_backend(self) -> Backend:
        opts = self._backend_options
        if self.backend_name == "server":
            from .backends.server import OpenAICompatibleBackend

            # n_ctx & co. configure in-process runtimes; a server reports its own context window.
            extra = {k: v for k, v in opts.items() if k not in _RUNTIME_OPTIONS}
            return OpenAICompatibleBackend(model=self.model, **extra)
        if self.backend_name == "transformers":
            from .backends.transformers import TransformersBackend

            return TransformersBackend(
                model=self.model, model_path=self.model_path, device=opts["device"], dtype=opts["dtype"],
                n_ctx=opts["n_ctx"], **{k: v for k, v in opts.items() if k not in _RUNTIME_OPTIONS},
            )
        from .backends.llama_cpp import LlamaCppBackend

        extra = {k: v for k, v in opts.items() if k not in _RUNTIME_OPTIONS}
        return LlamaCppBackend(self.model_path, model=self.model, n_ctx=opts["n_ctx"], n_threads=opts["n_threads"],
                               n_gpu_layers=opts["n_gpu_layers"], prefix_cache=opts["prefix_cache"] or None, **extra)

    @property
    def is_loaded(self) -> bool:
        """Whether this engine's model is in memory; never loads, resolves or assembles anything."""
        if self._backend is not None:
            return self._backend.is_loaded
        with _SHARED_LOCK:
            shared = _SHARED_BACKENDS.get(self._shared_key())
        return shared is not None and shared.is_loaded

    def _shared_key(self) -> tuple[Any, ...]:
        return (self.backend_name, str(self.model_path or ""), str(self.model or ""),
                tuple(sorted((k, repr(v)) for k, v in self._backend_options.items())))

    def load(self) -> HammerEngine:
        """Load the model now rather than on the first call."""
        self.backend.load()
        return self

    @property
    def model_name(self) -> str:
        return self.backend.model_name

    # ------------------------------------------------------------- binding
    def bind(self, tools: Sequence[Any], mask_names: bool | None = None) -> ToolBinding:
        """Convert and prepare a tool set once; repeated calls with the same tools hit a cache.

        Held to :attr:`schema_limits`: an oversized tool set raises
        :class:`~hammer_plugins.errors.SchemaLimitError` before it costs much.
        """
        with schema_limits(self.schema_limits):
            converted = tuple(to_tools(tools))
            masked = self.mask_names if mask_names is None else mask_names
            prints = tuple(t.fingerprint() for t in converted)
            key = (prints, masked, self.prompt_format, current_limits())
            binding = self._bindings.get(key)
            if binding is not None:
                return binding
            mask = NameMask.for_tools(converted) if masked and converted else None
            prompt_tools = tuple(mask.masked_tools) if mask else converted
            binding = ToolBinding(
                tools=converted, prompt_tools=prompt_tools, mask=mask,
                prefix=render_prefix(prompt_tools, self.prompt_format), prompt_format=self.prompt_format,
                limits=current_limits(),
            )
        self._bindings.put(key, binding, sum(map(len, prints)) + len(binding.prefix))
        return binding

    def render(self, messages: Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None = None,
               tool_choice: Any = "auto", mask_names: bool | None = None,
               response_format: Mapping[str, Any] | None = None) -> str:
        """The exact prompt text the model would see (first pass; nothing is loaded or counted)."""
        plan = self._plan(messages, tools, tool_choice, mask_names, None, True, None, response_format, fit=False)
        return plan.prompt

    # ----------------------------------------------------------- tokens
    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as this model reads it, by its own tokenizer (special tokens parsed).

        Loads the model on a local backend (a local file: never a download); asks a server's
        tokenizer on the server backend.
        """
        return self.backend.count_tokens(text)

    def token_ids(self, text: str) -> list[int]:
        """The ids of ``text``'s tokens by this model's own tokenizer (special tokens parsed)."""
        return self.backend.tokenize(text)

    def count_prompt_tokens(self, messages: Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None = None,
                            tool_choice: Any = "auto", mask_names: bool | None = None,
                            response_format: Mapping[str, Any] | None = None) -> int:
        """Tokens of the prompt :meth:`render` gives for this conversation and tools: what a call will
        put in the context window before the answer (memory trimming and summarizing rely on it).

        Example:
            >>> from hammer_plugins.backends.scripted import ScriptedBackend
            >>> engine = HammerEngine(backend=ScriptedBackend([]))   # counts about 4 characters a token
            >>> engine.count_prompt_tokens([Message.user("hi")]) > 0
            True
        """
        return self.count_tokens(self.render(messages, tools, tool_choice, mask_names, response_format))

    # ----------------------------------------------------------- generation
    def generate(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        tools: Sequence[Any] | None = None,
        tool_choice: Any = "auto",
        *,
        mask_names: bool | None = None,
        constrained: bool | None = None,
        parallel_tool_calls: bool | None = None,
        on_refusal: RefusalMode | None = None,
        response_format: Mapping[str, Any] | None = None,
        max_tool_rounds: int | None | Literal["default"] = "default",
        slot_filling: bool | Mapping[str, Any] | SlotFiller | None = None,
        partial_calls: bool = False,
        **settings: Any,
    ) -> HammerResponse:
        """Answer the conversation: tool calls, a refusal, text, or invalid calls.

        ``settings`` override sampling for this call (``max_tokens``, ``temperature``, ``stop``, ...).
        ``parallel_tool_calls`` (default: several calls allowed, one with a named ``tool_choice``).
        ``response_format`` shapes the answer as JSON: ``{"type": "json_object"}`` or ``{"type":
        "json_schema", "json_schema": {"name": ..., "schema": {...}}}``; with tools, the tools stay
        offered and the JSON answer ends the turn (in ``text``). ``slot_filling`` (``True``, a dict of
        :class:`~hammer_plugins.slot_filling.SlotFiller` options, or a filler) makes a user turn a
        slot-filling step: the answer is the follow-up question or the complete call, with its
        ``snapshot`` (see :mod:`hammer_plugins.slot_filling`). ``partial_calls=True`` lets a call
        leave out required parameters (the grammar makes every parameter optional): one raw snapshot.
        """
        return _last_response(self.stream(messages, tools, tool_choice, mask_names=mask_names, constrained=constrained,
                                          parallel_tool_calls=parallel_tool_calls, on_refusal=on_refusal,
                                          response_format=response_format, max_tool_rounds=max_tool_rounds,
                                          slot_filling=slot_filling, partial_calls=partial_calls, **settings))

    def stream(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        tools: Sequence[Any] | None = None,
        tool_choice: Any = "auto",
        *,
        mask_names: bool | None = None,
        constrained: bool | None = None,
        parallel_tool_calls: bool | None = None,
        on_refusal: RefusalMode | None = None,
        response_format: Mapping[str, Any] | None = None,
        max_tool_rounds: int | None | Literal["default"] = "default",
        slot_filling: bool | Mapping[str, Any] | SlotFiller | None = None,
        partial_calls: bool = False,
        **settings: Any,
    ) -> Iterator[StreamEvent]:
        """Stream :class:`TextDelta` and :class:`ToolCallDelta` events, then the :class:`HammerResponse`.

        Bad arguments (unknown tool choice, settings, a prompt over the context window) raise here,
        at the call, not at the first iteration.
        """
        return self._drive(self._prepare(messages, tools, tool_choice, mask_names=mask_names, constrained=constrained,
                                         parallel_tool_calls=parallel_tool_calls, on_refusal=on_refusal,
                                         response_format=response_format, max_tool_rounds=max_tool_rounds,
                                         slot_filling=slot_filling, partial_calls=partial_calls, **settings))

    def _prepare(self, messages: Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None, tool_choice: Any,
                 *, mask_names: bool | None = None, constrained: bool | None = None, parallel_tool_calls: bool | None = None,
                 on_refusal: RefusalMode | None = None, response_format: Mapping[str, Any] | None = None,
                 max_tool_rounds: int | None | Literal["default"] = "default",
                 slot_filling: bool | Mapping[str, Any] | SlotFiller | None = None, partial_calls: bool = False,
                 fit: bool = True, **settings: Any) -> Generator[Any, Any, None]:
        """Plan a call (validating every argument now) and return the I/O-free core that runs it.

        The one place that decides between a slot-filling step and plain generation.
        """
        filler = self._slot_filler(slot_filling, messages, tools, tool_choice)
        if filler is not None:
            steps = filler.steps(messages)
            first = next(steps)  # validates the history now
            plan = self._snapshot_plan(first, filler, constrained, settings, fit)
            return self._fill_slots(filler, steps, plan, constrained, settings, fit)
        rounds_cap = self.max_tool_rounds if max_tool_rounds == "default" else _check_rounds(max_tool_rounds)
        plan = self._plan(messages, tools, tool_choice, mask_names, constrained, parallel_tool_calls, settings,
                          response_format, fit=fit, rounds_cap=rounds_cap, partial_calls=partial_calls)
        return self._run(plan, on_refusal)

    # ---------------------------------------------------------- slot filling
    def _slot_filler(self, setting: bool | Mapping[str, Any] | SlotFiller | None,
                     messages: Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None,
                     tool_choice: Any) -> SlotFiller | None:
        """The filler for this call, or None when it is plain generation: slot filling off, or the turn
        goes on after tool results (the end-of-turn rules answer from them; a snapshot would repeat the call)."""
        if not setting:
            return None
        if isinstance(setting, SlotFiller):
            filler = setting
        else:
            if not tools:
                raise ValueError("slot_filling needs tools. Fix: bind the tools whose arguments are to be filled")
            if normalize_tool_choice(tool_choice, [t.name for t in to_tools(tools)]) != "auto":
                raise ValueError(f"slot_filling decides itself whether to call a tool; tool_choice={tool_choice!r} "
                                 "cannot be combined with it. Fix: leave tool_choice unset")
            filler = SlotFiller(self, tools, **({} if setting is True else dict(setting)))
        history = [to_message(m) for m in messages]
        return None if after_tool_results(history) else filler

    def _snapshot_plan(self, request: SnapshotRequest, filler: SlotFiller, constrained: bool | None,
                       settings: Mapping[str, Any], fit: bool) -> _Plan:
        """One snapshot call: the engine's prompt; one call at most, ``[]`` allowed, partial calls allowed."""
        convo, shown = request
        return self._plan(convo, shown, "auto", filler.mask_names, constrained, False, settings, fit=fit,
                          partial_calls=filler.relax_required)

    def _fill_slots(self, filler: SlotFiller, steps: Generator[SnapshotRequest, HammerResponse, Any], plan: _Plan,
                    constrained: bool | None, settings: Mapping[str, Any], fit: bool) -> Generator[Any, Any, None]:
        """A slot-filling turn, free of I/O like :meth:`_run`: each snapshot call the filler asks for
        runs through :meth:`_run`; the turn's answer (question, call, or refusal) is the only event."""
        usage = Usage()
        while True:
            response = yield from self._final(self._run(plan, "message"))
            usage = usage + response.usage
            try:
                plan = self._snapshot_plan(steps.send(response), filler, constrained, settings, fit)
            except StopIteration as done:
                snapshot, last = done.value
                break
        yield filler.decide(snapshot, last.model_copy(update={"usage": usage}))

    @staticmethod
    def _final(core: Generator[Any, Any, None]) -> Generator[Any, Any, HammerResponse]:
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

    def _run(self, plan: _Plan, on_refusal: RefusalMode | None) -> Generator[Any, Any, None]:
        """The logic of :meth:`stream`, free of I/O: it yields events for the caller and requests
        (:class:`_Fit`, :class:`_Generate`, ``_NEXT``) that a driver (:meth:`_drive`, :meth:`_adrive`)
        answers from the backend, so the sync and the native async paths share every rule."""
        started = time.perf_counter()
        if not plan.fitted:  # the native async path counts tokens with an awaited call
            plan.settings.max_tokens = yield _Fit(plan.prompt, plan.settings.max_tokens)
        ending_turn = plan.tool_choice == "auto" and after_tool_results(plan.messages)
        if ending_turn and plan.rounds_spent:
            yield from self._answer(plan, HammerResponse(kind="text", model=self.backend.model_name), started)
            return
        if plan.tool_choice == "none":
            yield from self._answer(plan, HammerResponse(kind="text", model=self.backend.model_name), started,
                                    prompt=plan.prompt, grammar=plan.grammar)
            return
        answered = answered_calls(plan.messages) if ending_turn else frozenset()
        raw_parts: list[str] = []
        usage = Usage()
        finish = "stop"
        timings: dict[str, float] = {}
        scanner = CallScanner() if plan.grammar is not None else None
        streamed: list[ToolCall] = []
        chunk = yield _Generate(plan.prompt, plan.settings, plan.grammar)
        while chunk is not _END:
            if chunk.text:
                raw_parts.append(chunk.text)
                yield TextDelta(chunk.text)
                for item in scanner.feed(chunk.text) if scanner else []:
                    calls, _ = items_to_calls([item], "")
                    resolved = self._resolve(plan, calls[0], "") if calls else None
                    if isinstance(resolved, ToolCall) and call_key(resolved) not in answered and (
                            plan.parallel or not streamed):
                        streamed.append(resolved)
                        yield ToolCallDelta(len(streamed) - 1, resolved)
            if chunk.usage is not None:
                usage = Usage(prompt_tokens=chunk.usage.prompt_tokens, completion_tokens=chunk.usage.completion_tokens)
                finish = chunk.finish_reason or "stop"
                timings = dict(chunk.timings)
            chunk = yield _NEXT
        raw = "".join(raw_parts)
        response = self._finish(plan, raw, usage, finish, timings)
        if answered:
            response.tool_calls = [c for c in response.tool_calls if call_key(c) not in answered]
            if not response.tool_calls and response.kind == "tool_calls":
                response.kind = "refusal"  # only repeats: nothing more to call
        if not plan.parallel:
            response.tool_calls = response.tool_calls[:1]
        for index, call in enumerate(response.tool_calls[: len(streamed)]):
            if call_key(call) == call_key(streamed[index]):
                call.id = streamed[index].id
        if response.kind == "refusal" and (ending_turn or plan.answer_as is not None):
            # After tool results, [] means "done": answer from the results, whatever on_refusal says.
            # With a response format the agent is done too: the answer is the structured one.
            yield from self._answer(plan, response.model_copy(update={"kind": "text"}), started)
            return
        mode = on_refusal or self.on_refusal
        if response.kind == "refusal" and mode == "raise":
            raise RefusalError(f"the model found no suitable tool (answered '[]'); raw output: {raw!r}")
        if response.kind == "refusal" and mode == "answer":
            yield from self._answer(plan, response, started)
            return
        response.timings["engine_total"] = time.perf_counter() - started
        yield response

    def _answer(self, plan: _Plan, base: HammerResponse, started: float, prompt: str | None = None,
                grammar: Grammar | None = None) -> Generator[Any, Any, None]:
        """A tool-free pass; its answer (prose, or the JSON of the response format) becomes ``text`` of
        ``base`` (usage of both passes summed)."""
        if prompt is None:
            prompt = render_chat(plan.messages, answer_as=plan.answer_as)
            grammar = plan.answer_grammar
        settings = plan.settings.model_copy()
        settings.max_tokens = yield _Fit(prompt, settings.max_tokens)
        parts: list[str] = []
        usage = base.usage
        finish = "stop"
        timings: dict[str, float] = dict(base.timings)
        pending = ""  # whitespace held back until more text follows, so deltas add up to the stripped text
        chunk = yield _Generate(prompt, settings, grammar)
        while chunk is not _END:
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
                usage = usage + Usage(prompt_tokens=chunk.usage.prompt_tokens,
                                      completion_tokens=chunk.usage.completion_tokens)
                finish = chunk.finish_reason or "stop"
                timings.update(chunk.timings)
            chunk = yield _NEXT
        raw = "".join(parts)
        text = raw.strip()
        if base.kind == "refusal" and not text:
            text = self.refusal_text
        timings["engine_total"] = time.perf_counter() - started
        update: dict[str, Any] = {"text": text, "usage": usage, "finish_reason": finish, "timings": timings}
        if base.kind == "text":
            update["raw"] = raw
        yield base.model_copy(update=update)

    def _drive(self, core: Generator[Any, Any, None], cancel: threading.Event | None = None) -> Iterator[StreamEvent]:
        """Run :meth:`_run` on the backend's sync API; ``cancel`` (set from another thread) stops the
        generation at the next token with :class:`GenerationCancelled`."""
        chunks: Iterator[GenerationChunk] | None = None
        reply: Any = None
        try:
            while True:
                try:
                    item = core.send(reply)
                except StopIteration:
                    return
                reply = None
                if isinstance(item, _Fit):
                    reply = self._fit(item.prompt, item.max_tokens)
                elif isinstance(item, _Generate):
                    if cancel is not None and cancel.is_set():  # e.g. between the two passes of an answer
                        raise GenerationCancelled("the call was cancelled")
                    # (cancel only when there is one: a backend written before it may not take the argument)
                    chunks = iter(self.backend.stream(item.prompt, item.settings, item.grammar, cancel=cancel)
                                  if cancel is not None else self.backend.stream(item.prompt, item.settings, item.grammar))
                    reply = next(chunks, _END)
                elif item is _NEXT:
                    reply = next(chunks, _END)  # type: ignore[arg-type]
                else:
                    yield item
        finally:
            core.close()
            close = getattr(chunks, "close", None)
            if close is not None:
                close()  # a caller that stopped early ends the generation (a server drops the request)

    async def _adrive(self, core: Generator[Any, Any, None]) -> AsyncIterator[StreamEvent]:
        """Run :meth:`_run` on a native-async backend (``astream``, ``acount_tokens``, ``aload``): no worker
        thread and no lock, so concurrent calls really run concurrently."""
        backend = self.backend
        chunks: Any = None
        reply: Any = None
        try:
            while True:
                try:
                    item = core.send(reply)
                except StopIteration:
                    return
                reply = None
                if isinstance(item, _Fit):
                    reply = await self._afit(item.prompt, item.max_tokens)
                elif isinstance(item, _Generate):
                    chunks = backend.astream(item.prompt, item.settings, item.grammar)
                    reply = await anext(chunks, _END)
                elif item is _NEXT:
                    reply = await anext(chunks, _END)
                else:
                    yield item
        finally:
            core.close()
            if chunks is not None:
                await chunks.aclose()

    async def _astream_native(self, messages: Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None = None,
                              tool_choice: Any = "auto", **kwargs: Any) -> AsyncIterator[StreamEvent]:
        """:meth:`stream` on a native-async backend: planned the same way, fitted with awaited token counts.

        The planning (tool conversion, grammar, prompt) runs in a worker thread: a large tool set does
        not hold up the other calls on the event loop while it is converted.
        """
        import asyncio

        core = await asyncio.to_thread(self._prepare, messages, tools, tool_choice, fit=False, **kwargs)
        async for event in self._adrive(core):
            yield event

    async def agenerate(self, messages: Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None = None,
                        tool_choice: Any = "auto", **kwargs: Any) -> HammerResponse:
        """Async :meth:`generate`: on the event loop for native-async backends (the server backend),
        otherwise in a worker thread so the event loop stays free."""
        if not self.backend.native_async:
            cancel = threading.Event()

            def work() -> HammerResponse:
                return _last_response(self._drive(self._prepare(messages, tools, tool_choice, **kwargs), cancel))

            return await _in_worker(work, cancel)
        final: HammerResponse | None = None
        async for event in self._astream_native(messages, tools, tool_choice, **kwargs):
            if isinstance(event, HammerResponse):
                final = event
        assert final is not None
        return final

    async def astream(self, messages: Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None = None,
                      tool_choice: Any = "auto", **kwargs: Any) -> AsyncIterator[StreamEvent]:
        """Async :meth:`stream`. Native-async backends (the server backend) stream on the event loop, with
        no lock; for the others one worker thread generates and events arrive through a queue."""
        if self.backend.native_async:
            async for event in self._astream_native(messages, tools, tool_choice, **kwargs):
                yield event
            return
        import asyncio

        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        cancel = threading.Event()  # set when the consumer stops (cancelled, closed early): the model stops too

        def produce() -> None:
            try:
                for event in self._drive(self._prepare(messages, tools, tool_choice, **kwargs), cancel):
                    loop.call_soon_threadsafe(queue.put_nowait, ("event", event))
            except GenerationCancelled:
                pass  # nobody reads any more
            except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
                loop.call_soon_threadsafe(queue.put_nowait, ("error", exc))
            finally:
                loop.call_soon_threadsafe(queue.put_nowait, ("done", None))

        worker = loop.run_in_executor(None, contextvars.copy_context().run, produce)
        try:
            while True:
                kind, payload = await queue.get()
                if kind == "done":
                    break
                if kind == "error":
                    raise payload
                yield payload
        finally:
            cancel.set()
            # The worker stops at the next token and releases the model: once this generator is closed
            # (or the task cancelled), the next call finds the model free.
            await asyncio.wait([worker])

    # ------------------------------------------------------------- planning
    def _plan(self, messages: Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None, tool_choice: Any,
              mask_names: bool | None, constrained: bool | None, parallel: bool | None,
              overrides: Mapping[str, Any] | None, response_format: Mapping[str, Any] | None = None,
              fit: bool = True, rounds_cap: int | None = None, partial_calls: bool = False) -> _Plan:
        msgs = [to_message(m) for m in messages]
        if not msgs:
            raise ValueError("messages is empty. Fix: pass at least one user message")
        binding = self.bind(tools or [], mask_names)
        names = [t.name for t in binding.tools]
        choice = normalize_tool_choice(tool_choice, names) if binding.tools else "none"
        if parallel is None:
            # A named tool choice forces that one tool: one call, as with_structured_output and
            # LangChain's standard tests read it (forced, a small model with nothing to pass may
            # otherwise list calls of it until max_tokens). parallel_tool_calls=True still allows more.
            parallel = choice in ("auto", "required", "none")
        unknown = sorted(set(overrides or {}) - set(GenerationSettings.model_fields))
        if unknown:
            raise TypeError(f"unknown generation settings {unknown}; use {sorted(GenerationSettings.model_fields)}")
        settings = self.settings.model_copy(update={k: v for k, v in (overrides or {}).items() if v is not None})
        use_grammar = self.constrained if constrained is None else constrained
        # A response format is the answer's shape once the tools are done (or when there are none):
        # the tool passes stay Hammer's call lists, and the answer pass writes JSON of the format.
        answer_as = describe_answer(response_format) if response_format is not None else None
        spent = rounds_cap is not None and tool_rounds(msgs, set(names)) >= rounds_cap
        only: frozenset[str] = frozenset()
        if choice == "none":
            prompt = render_chat(msgs, answer_as=answer_as)
        else:
            rendered = [self._masked_message(m, binding) for m in msgs]
            prompt = render_prompt(rendered, binding.prompt_tools, self.prompt_format, prefix=binding.prefix)
            if choice == "required" and spent and after_tool_results(msgs):
                # The rounds are spent but a call is required (an agent that ends by calling a tool):
                # it must be to a tool not called yet in this turn, or the agent would loop.
                only = frozenset(names) - called_tools(msgs)
            settings.shared_prefix_chars = len(binding.prefix)
        if use_grammar and (choice != "none" or response_format is not None):
            self.backend.prepare_grammar()  # before _fit loads the model, so that both run at once
        if fit:  # the native async path fits with an awaited token count instead
            # Before any grammar is built: a prompt over the context window costs no grammar.
            settings.max_tokens = self._fit(prompt, settings.max_tokens)
        with schema_limits(self.schema_limits):
            answer_grammar = self._json_grammar(response_format) if response_format is not None and use_grammar else None
        if choice == "none":
            grammar = answer_grammar
        else:
            grammar = binding.grammar(choice, parallel, only, partial_calls) if use_grammar else None
        return _Plan(messages=msgs, binding=binding, tool_choice=choice, prompt=prompt, grammar=grammar,
                     settings=settings, parallel=parallel, fitted=fit, rounds_spent=spent, answer_as=answer_as,
                     answer_grammar=answer_grammar)

    @staticmethod
    def _json_grammar(response_format: Mapping[str, Any]) -> Grammar:
        kind = response_format.get("type") if isinstance(response_format, Mapping) else None
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
        raise ValueError(f"response_format type {kind!r} is not supported; use 'json_object' or 'json_schema'")

    @staticmethod
    def _masked_message(message: Message, binding: ToolBinding) -> Message:
        if binding.mask is None or not message.tool_calls:
            return message
        return message.model_copy(update={"tool_calls": [binding.mask.mask_call(c) for c in message.tool_calls]})

    def _fit(self, prompt: str, max_tokens: int) -> int:
        """Check the prompt fits; shrink ``max_tokens`` to the room left when that is enough."""
        window = self.backend.context_window
        return self._room(self.backend.count_tokens(prompt), max_tokens, window)

    async def _afit(self, prompt: str, max_tokens: int) -> int:
        """:meth:`_fit` on a native-async backend: loads and counts without blocking the event loop."""
        backend = self.backend
        await backend.aload()
        return self._room(await backend.acount_tokens(prompt), max_tokens, backend.context_window)

    @staticmethod
    def _room(prompt_tokens: int, max_tokens: int, window: int) -> int:
        room = window - prompt_tokens
        if room < min(max_tokens, _MIN_ANSWER_TOKENS):
            raise ContextWindowExceededError(prompt_tokens, max_tokens, window)
        return min(max_tokens, room)

    @staticmethod
    def _resolve(plan: _Plan, call: ToolCall, raw: str) -> ToolCall | InvalidToolCall:
        """Unmask a parsed call, check it names a bound tool and its arguments keep the schema keywords
        the grammar may not express (:func:`~hammer_plugins.schema_keywords.keyword_violation`)."""
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

    def _finish(self, plan: _Plan, raw: str, usage: Usage, finish: str, timings: dict[str, float]) -> HammerResponse:
        parse_started = time.perf_counter()
        # The loop guard stopped a call list that kept repeating itself, or max_tokens cut it: the
        # complete calls made so far stand and the cut tail is dropped (see _cut_or_invalid_text).
        cut = finish == "length" and not timings.get("loop_guard_stop")
        parsed = parse_stopped_list(raw) if timings.get("loop_guard_stop") or cut else parse_output(raw)
        if cut and parsed.kind == "tool_calls":
            timings["length_stop"] = 1
        calls: list[ToolCall] = []
        invalid = list(parsed.invalid_tool_calls)
        for call in parsed.tool_calls:
            real = self._resolve(plan, call, raw)
            (calls if isinstance(real, ToolCall) else invalid).append(real)  # type: ignore[arg-type]
        kind = parsed.kind
        if parsed.kind == "tool_calls" and not calls:
            kind = "invalid"
        text = parsed.text
        if kind == "refusal":
            text = self.refusal_text
        if kind == "invalid" and not text.strip():
            text = _cut_or_invalid_text(invalid, finish, plan.settings.max_tokens)
        response = HammerResponse(
            kind=kind, tool_calls=calls, invalid_tool_calls=invalid, text=text, raw=raw, usage=usage,
            finish_reason="tool_calls" if calls and finish == "stop" else finish,
            model=self.backend.model_name, timings=timings,
        )
        response.timings["parse"] = time.perf_counter() - parse_started
        return response


def _last_response(events: Iterator[StreamEvent]) -> HammerResponse:
    """The :class:`HammerResponse` that ends a stream of events (every stream ends with one)."""
    final: HammerResponse | None = None
    for event in events:
        if isinstance(event, HammerResponse):
            final = event
    assert final is not None
    return final


def _cut_or_invalid_text(invalid: Sequence[InvalidToolCall], finish: str, max_tokens: int) -> str:
    """What an answer with no valid call says, so that no agent turn ends with an empty message.

    An agent loop (LangChain's ``create_agent``, LlamaIndex's ``FunctionAgent``) ends its turn on a
    message without valid calls; the invalid calls ride along but are not shown, so the text names
    the failure and the fix. Complete calls before a cut are kept (:meth:`HammerEngine._finish`):
    this text is for output that has none.

    Example:
        >>> from hammer_plugins.calls import InvalidToolCall
        >>> _cut_or_invalid_text([InvalidToolCall(raw="[{", name="f", reason="cut")], "length", 30)[:60]
        'No tool was called: the call to f was cut off at max_tokens='
    """
    names = sorted({c.name for c in invalid if c.name})
    target = f"the call to {', '.join(names)}" if names else "the tool call"
    if finish == "length":
        return (f"No tool was called: {target} was cut off at max_tokens={max_tokens} before it was "
                "complete. Raise max_tokens, or ask for fewer things at once.")
    reasons = "; ".join(dict.fromkeys(c.reason for c in invalid if c.reason)) or "the output was not a valid call"
    return f"No tool was called: {target} was not valid ({reasons})."


async def _in_worker(work: Callable[[], HammerResponse], cancel: threading.Event) -> HammerResponse:
    """Run ``work`` in a worker thread; when the awaiting task is cancelled, set ``cancel`` (the generation
    stops at the next token), wait for the worker to end, and let the cancellation through.

    So a cancelled call (``task.cancel()``, ``asyncio.wait_for``'s timeout) has stopped the model and
    released its lock by the time the cancellation reaches the caller.
    """
    # asyncio is imported by the async half only: a sync process (`hammer call`) skips its 0.02-0.05 s.
    import asyncio

    worker = asyncio.get_running_loop().run_in_executor(None, contextvars.copy_context().run, work)
    try:
        return await asyncio.shield(worker)
    except asyncio.CancelledError:
        cancel.set()
        await asyncio.wait([worker])  # one token at most; the worker's GenerationCancelled stays inside
        if not worker.cancelled():
            worker.exception()  # retrieved: asyncio does not log it as never retrieved
        raise


@dataclass(frozen=True)
class _Fit:
    """:meth:`HammerEngine._run` asks its driver for ``max_tokens`` fitted to the context window."""

    prompt: str
    max_tokens: int


@dataclass(frozen=True)
class _Generate:
    """:meth:`HammerEngine._run` asks its driver to start a generation; the reply is its first chunk."""

    prompt: str
    settings: GenerationSettings
    grammar: Grammar | None


_NEXT = object()  # _run asks for the next chunk of the running generation
_END = object()  # the driver's reply once the generation has ended


# The runtime options HammerEngine names itself; the rest of its keyword arguments go to the backend.
_RUNTIME_OPTIONS = ("n_ctx", "n_threads", "n_gpu_layers", "device", "dtype", "prefix_cache")


@dataclass
class _Plan:
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
