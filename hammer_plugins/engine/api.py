"""The engine's public API: :class:`HammerEngine`, its settings, and the calls people make.

The jobs behind the calls live in the package's other modules: :mod:`~hammer_plugins.engine.shared_backends`
(which backend, shared per process), :mod:`~hammer_plugins.engine.binding` (tool sets and the grammar
cache), :mod:`~hammer_plugins.engine.planning` (one call's prompt, grammar and settings),
:mod:`~hammer_plugins.engine.turn` (the turn rules, free of I/O), :mod:`~hammer_plugins.engine.slots`
(slot filling) and :mod:`~hammer_plugins.engine.drivers` (running the rules on a backend).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hammer_plugins.backends.base import BackendInterface, GenerationSettings
from hammer_plugins.backends.registry import create_backend, find_backend
from hammer_plugins.engine.binding import ToolBinding, bind_tools, new_binding_cache
from hammer_plugins.engine.core import RefusalMode
from hammer_plugins.engine.drivers import adrive, drive
from hammer_plugins.engine.fields import DEFAULT_MAX_TOOL_ROUNDS
from hammer_plugins.engine.fields import DEFAULTS as _D
from hammer_plugins.engine.planning import check_budget, check_rounds, make_plan
from hammer_plugins.engine.request import EngineRequest, OnMissing
from hammer_plugins.engine.shared_backends import loaded, model_prompt_format, shared_backend, shared_key
from hammer_plugins.engine.slots import fill_slots, slot_filler, snapshot_plan
from hammer_plugins.engine.tool_selection import ConversationOffers
from hammer_plugins.engine.turn import last_response, run
from hammer_plugins.output.events import StreamEvent
from hammer_plugins.output.response import HammerResponse
from hammer_plugins.prompt.render import PROMPT_FORMATS, PromptFormat
from hammer_plugins.tools.limits import SchemaLimits, schema_limits
from hammer_plugins.tools.meaning import as_selector
from hammer_plugins.tools.selector import ToolSelector
from hammer_plugins.values.messages import Message

__all__ = ["DEFAULT_MAX_TOOL_ROUNDS", "HammerEngine"]


class HammerEngine:
    """A Hammer model with its prompt, grammar, masking and parser: the framework-free core.

    Args:
        model_path: a ``.gguf`` file (llama.cpp) or checkpoint directory (transformers).
        model: a preset (``"hammer2.1-1.5b"``: its GGUF on llama.cpp, its checkpoint on transformers), a
            Hugging Face repo (``"owner/repo"``, ``"owner/repo:Q4_K_M"``, ``"owner/repo/file.gguf"``), a
            local directory or a ``.gguf`` path (see :mod:`hammer_plugins.models.source`).
        backend: ``"llama_cpp"`` (default), ``"transformers"``, ``"server"`` (an OpenAI-compatible
            inference server: pass ``base_url=``, and ``api_key=``, ``timeout=``, ... as for
            :class:`~hammer_plugins.backends.remote.OpenAICompatibleBackend`), or a :class:`BackendInterface` instance.
        prompt_format: ``"hammer2.1"``, ``"hammer2.0"`` or ``"hammer1.0"``; ``None`` (default): the
            layout of the model named (a Hammer 2.0 or 1.0 preset has its own), else ``"hammer2.1"``.
        constrained: constrain decoding with a grammar built from the tools (default on).
        mask_names: replace function and parameter names with opaque strings in the prompt.
        on_refusal: what ``[]`` becomes: ``"message"`` (a refusal text), ``"answer"`` (a second,
            tool-free pass answers in plain language), or ``"raise"`` (:class:`RefusalError`).
        max_tool_rounds: rounds of tool calls in one agent turn (since the last user message) after
            which the model answers from the results instead of being offered the tools again
            (``None``: no limit). See :mod:`hammer_plugins.values.agent_loop` for the end-of-turn rules.
        on_missing: what a proposed call becomes when nobody gave one of its required values: ``"ask"``
            (held back as ``HammerResponse.pending_calls``; the text asks for the values, the next turn
            completes the call), ``"call"`` (sent as the model wrote it) or ``"error"``
            (:class:`~hammer_plugins.engine.missing.MissingArgumentsError`). See :mod:`~hammer_plugins.engine.missing`.
        tool_budget: prompt tokens the tools block may take; a larger tool set is narrowed per call to the
            best matches (:mod:`~hammer_plugins.engine.tool_selection`; ``pinned_tools`` stay). 0: all tools.
        tool_selector: who chooses the tools offered when a tool set is over ``tool_budget``: ``"meaning"``
            (default; multilingual embeddings fused with BM25), ``"bm25"`` (words only), a
            :class:`~hammer_plugins.tools.selector.ToolSelector`, or a function ``(question, tools) -> names``.
        relevance_gate: refuse without running the model when no tool shares a word with the question.
        max_tokens, temperature, top_p, top_k, repeat_penalty, seed: sampling settings.
        loop_guard: close a string value the model repeats itself in (constrained local decoding;
            see :mod:`hammer_plugins.grammar.token_mask`). On by default.
        n_ctx, n_threads, n_gpu_layers: llama.cpp settings. device, dtype: transformers settings.
        prefix_cache: llama.cpp: keep the KV state of prompt prefixes (tools block, instructions) on disk for later
            turns and processes (default on: ``$HAMMER_CACHE_DIR/prefix-kv``; a folder; ``False``: off).
        cache_ram: llama.cpp: MiB of memory for the KV states of recent prompts, a request restoring the one that
            shares its longest prefix (:mod:`~hammer_plugins.backends.prompt_states`; 0: off).
        backend_kwargs: anything else for the backend constructor.

    Attributes:
        schema_limits: the budgets tool sets and response schemas are held to (size once ``$ref`` is
            inlined, depth, enums, grammar size and build time), a
            :class:`~hammer_plugins.tools.limits.SchemaLimits`; ``None`` (default): the process default
            (``HAMMER_LIMIT_*`` environment variables, :func:`~hammer_plugins.tools.limits.set_default_limits`).

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
        # Every default is the declaration's (hammer_plugins.engine.fields), never written again here.
        backend: str | BackendInterface = _D.backend,
        prompt_format: PromptFormat | None = _D.prompt_format,
        constrained: bool = _D.constrained,
        mask_names: bool = _D.mask_names,
        on_refusal: RefusalMode = _D.on_refusal,
        refusal_text: str = _D.refusal_text,
        on_missing: OnMissing = _D.on_missing,
        max_tool_rounds: int | None = _D.max_tool_rounds,
        tool_budget: int = _D.tool_budget,
        tool_selector: str | ToolSelector | Callable[..., Any] = _D.tool_selector,
        relevance_gate: bool = _D.relevance_gate,
        max_tokens: int = _D.max_tokens,
        temperature: float = _D.temperature,
        top_p: float = _D.top_p,
        top_k: int = _D.top_k,
        repeat_penalty: float = _D.repeat_penalty,
        loop_guard: bool = _D.loop_guard,
        seed: int | None = _D.seed,
        n_ctx: int = _D.n_ctx,
        n_threads: int | None = _D.n_threads,
        n_gpu_layers: int = _D.n_gpu_layers,
        device: str = _D.device,
        dtype: str = _D.dtype,
        prefix_cache: bool | str | Path = _D.prefix_cache,
        cache_ram: int = _D.cache_ram,
        **backend_kwargs: Any,
    ) -> None:
        prompt_format = prompt_format or model_prompt_format(model_path, model, backend)
        if prompt_format not in PROMPT_FORMATS:
            raise ValueError(f"unknown prompt_format {prompt_format!r}; use one of {PROMPT_FORMATS}")
        if on_refusal not in ("message", "answer", "raise"):
            raise ValueError(f"on_refusal must be 'message', 'answer' or 'raise', got {on_refusal!r}")
        if on_missing not in ("ask", "call", "error"):
            raise ValueError(f"on_missing must be 'ask', 'call' or 'error', got {on_missing!r}")
        if isinstance(backend, str):
            find_backend(backend)  # an unknown name: ValueError naming every backend
        self.model_path = model_path
        self.model = model
        self.backend_name = backend if isinstance(backend, str) else backend.name
        self._backend: BackendInterface | None = backend if isinstance(backend, BackendInterface) else None
        self.prompt_format: PromptFormat = prompt_format
        self.constrained = constrained
        self.mask_names = mask_names
        self.on_refusal: RefusalMode = on_refusal
        self.refusal_text = refusal_text
        self.on_missing: OnMissing = on_missing
        self.max_tool_rounds = check_rounds(max_tool_rounds)
        self.tool_budget = check_budget(tool_budget)
        self.tool_selector: ToolSelector = as_selector(tool_selector)
        self.offer_memory: ConversationOffers | None = ConversationOffers()
        self.relevance_gate = relevance_gate
        self.settings = GenerationSettings(max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                                           top_k=top_k, repeat_penalty=repeat_penalty, seed=seed,
                                           loop_guard=loop_guard)
        self._backend_options = {"n_ctx": n_ctx, "n_threads": n_threads, "n_gpu_layers": n_gpu_layers,
                                 "device": device, "dtype": dtype, "prefix_cache": prefix_cache,
                                 "cache_ram": cache_ram, **backend_kwargs}
        # The budgets tool sets and response schemas are held to (None: the process default); see
        # SchemaLimits. An attribute, so set it after construction: engine.schema_limits = SchemaLimits(...).
        self.schema_limits: SchemaLimits | None = None
        self._bindings = new_binding_cache()  # the tool sets bound recently
        self._create_lock = threading.Lock()

    # ------------------------------------------------------------- backend
    @property
    def backend(self) -> BackendInterface:
        """The backend (created on first access; the model itself loads on first generation)."""
        if self._backend is None:
            with self._create_lock:
                if self._backend is None:
                    self._backend = self._make_backend()
        return self._backend

    def _make_backend(self) -> BackendInterface:
        # One loaded model per configuration per process: many engines (e.g. every ChatHammer a
        # framework constructs) share it, and its lock serializes their calls.
        return shared_backend(self._shared_key(), self._new_backend)

    def _new_backend(self) -> BackendInterface:
        return create_backend(self.backend_name, self.model_path, self.model, self._backend_options)

    @property
    def is_loaded(self) -> bool:
        """Whether this engine's model is in memory; never loads, resolves or assembles anything."""
        if self._backend is not None:
            return self._backend.is_loaded
        return loaded(self._shared_key())

    def _shared_key(self) -> tuple[Any, ...]:
        return shared_key(self.backend_name, self.model_path, self.model, self._backend_options)

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
        :class:`~hammer_plugins.values.errors.SchemaLimitError` before it costs much.
        """
        with schema_limits(self.schema_limits):
            return bind_tools(tools, self.mask_names if mask_names is None else mask_names, self.prompt_format,
                              self._bindings)

    def render(self, messages: EngineRequest | Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None = None,
               tool_choice: Any = "auto", mask_names: bool | None = None,
               response_format: Mapping[str, Any] | None = None, *, pinned_tools: Sequence[str] = (),
               tool_budget: int | None = None) -> str:
        """The exact prompt text the model would see (first pass; nothing is loaded or counted), with the
        tools a large tool set is narrowed to (see ``tool_budget``). ``messages`` may be an :class:`EngineRequest`."""
        request = messages if isinstance(messages, EngineRequest) else EngineRequest.of(
            messages, tools, tool_choice, mask_names=mask_names, parallel_tool_calls=True,
            response_format=None if response_format is None else dict(response_format),
            pinned_tools=tuple(pinned_tools), tool_budget=tool_budget)
        return make_plan(self, request, fit=False).prompt

    # ----------------------------------------------------------- tokens
    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by this model's own tokenizer (special tokens parsed): loads a local model (never a
        download); asks a server's tokenizer on the server backend."""
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
    def generate(self, request: EngineRequest | Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None = None,
                 tool_choice: Any = "auto", **options: Any) -> HammerResponse:
        """Answer the conversation: tool calls, a refusal, text, or invalid calls.

        ``request`` is an :class:`~hammer_plugins.engine.request.EngineRequest`, or the messages, with
        ``tools``, ``tool_choice`` and ``options`` as its fields (an option that is no field is a ``TypeError``).
        The options: sampling for this call (``max_tokens``, ``temperature``, ``stop``, ...);
        ``parallel_tool_calls`` (default: several calls allowed, one with a named ``tool_choice``);
        ``response_format`` shapes the answer as JSON: ``{"type": "json_object"}`` or ``{"type":
        "json_schema", "json_schema": {"name": ..., "schema": {...}}}``; with tools, the tools stay
        offered and the JSON answer ends the turn (in ``text``). ``slot_filling`` (``True``, a dict of
        :class:`~hammer_plugins.slot_filling.filler.SlotFiller` options, or a filler) makes a user turn a
        slot-filling step: the answer is the follow-up question or the complete call, with its
        ``snapshot`` (see :mod:`hammer_plugins.slot_filling.filler`). ``partial_calls=True`` lets a call
        leave out required parameters (the grammar makes every parameter optional): one raw snapshot.
        ``pinned_tools``: tools always offered when a large tool set is narrowed (``tool_budget``, which a
        call may override); ``HammerResponse.offered_tools`` says which tools the prompt offered.
        """
        return last_response(self.stream(request, tools, tool_choice, **options))

    def stream(self, request: EngineRequest | Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None = None,
               tool_choice: Any = "auto", *, cancel: threading.Event | None = None,
               **options: Any) -> Iterator[StreamEvent]:
        """Stream :class:`TextDelta` and :class:`ToolCallDelta` events, then the :class:`HammerResponse`.

        ``request`` as for :meth:`generate`. Bad arguments (unknown tool choice, settings, a prompt over the
        context window) raise here, at the call, not at the first iteration. ``cancel``, set from another
        thread, stops the generation at its next token (:class:`~hammer_plugins.backends.base.GenerationCancelled`).
        """
        return drive(self, self._prepare(as_request(request, tools, tool_choice, options)), cancel)

    def _prepare(self, request: EngineRequest, fit: bool = True) -> Generator[Any, Any, None]:
        """Plan a call (every argument validated now) and return the I/O-free core that runs it: the one
        place that decides between a slot-filling step and plain generation."""
        filler = slot_filler(self, request)
        if filler is not None:
            steps = filler.steps(request.messages)
            first = next(steps)  # validates the history now
            return fill_slots(self, filler, steps, snapshot_plan(self, first, filler, request, fit), request, fit)
        return run(self, make_plan(self, request, fit=fit), request.on_refusal)

    async def agenerate(self, request: EngineRequest | Sequence[Message | Mapping[str, Any]],
                        tools: Sequence[Any] | None = None, tool_choice: Any = "auto", **options: Any) -> HammerResponse:
        """Async :meth:`generate`, with the event loop free: see :meth:`astream`."""
        final: HammerResponse | None = None
        async for event in self.astream(request, tools, tool_choice, **options):
            if isinstance(event, HammerResponse):
                final = event
        assert final is not None
        return final

    async def astream(self, request: EngineRequest | Sequence[Message | Mapping[str, Any]],
                      tools: Sequence[Any] | None = None, tool_choice: Any = "auto",
                      **options: Any) -> AsyncIterator[StreamEvent]:
        """Async :meth:`stream`. The call is planned in a worker thread (a large tool set does not hold up
        the event loop while it is converted), fitted with awaited token counts, and run through the
        backend's async half: on the event loop with no lock for the server backend, in a worker thread
        under the model's lock for a local one. Closing this generator, or cancelling its task, stops
        the generation before the close returns."""
        import asyncio

        call = as_request(request, tools, tool_choice, options)  # a misspelled option raises at the call
        core = await asyncio.to_thread(self._prepare, call, False)
        events = adrive(self, core)
        try:
            async for event in events:
                yield event
        finally:  # closed early (or cancelled): the generation stops now, not when the iterator is collected
            await events.aclose()


def as_request(request: EngineRequest | Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None,
               tool_choice: Any, options: Mapping[str, Any]) -> EngineRequest:
    """The call's :class:`EngineRequest`: given, or built from the messages, tools, ``tool_choice`` and options."""
    if isinstance(request, EngineRequest):
        if tools is not None or tool_choice != "auto" or options:
            raise TypeError("pass an EngineRequest alone: its tools, tool_choice and options are its fields "
                            "(request.model_copy(update={...}) makes another)")
        return request
    return EngineRequest.of(request, tools, tool_choice, **options)
