"""Every setting of an engine, declared once: its name, type, bounds, default and description.

Everything else derives from :class:`EngineFields`: :class:`~hammer_plugins.HammerEngine`'s keyword
defaults, the fields of :class:`~hammer_plugins.engine.settings.EngineSettings` (and so of ``ChatHammer`` and
``HammerLLM``, which inherit it), and the ``hammer`` command's engine flags
(:func:`~hammer_plugins.engine.settings.add_engine_arguments`, ``hammer serve``'s ``--n-ctx``). Sampling
defaults are :class:`~hammer_plugins.backends.base.GenerationSettings`' (the per-call settings a
backend receives) and the in-process backends' defaults :class:`~hammer_plugins.backends.base.LocalBackendSettings`'
(the backends' own keyword arguments read them too): read here, never written again. A setting the ``hammer``
command shows names its flag in ``json_schema_extra`` (``flag``, and ``dest``, ``flag_help``), so a new flag is
one line of its field. ``tests/unit/test_layout.py`` fails when a
default of a setting is written anywhere else.

Example:
    >>> DEFAULTS.n_ctx, DEFAULTS.max_tokens, DEFAULTS.max_tool_rounds
    (8192, 512, 1)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_serializer

from hammer_plugins.backends.base import BACKEND_DEFAULTS, BackendInterface, GenerationSettings
from hammer_plugins.backends.registry import BACKEND_NAMES, describe_backends
from hammer_plugins.engine.tool_selection import DEFAULT_TOOL_BUDGET
from hammer_plugins.output.response import DEFAULT_REFUSAL_TEXT

# One round of (possibly parallel) calls per user request, as in Hammer's training data; the
# stand-in default model chains spurious calls on results when allowed more (measured).
DEFAULT_MAX_TOOL_ROUNDS = 1
_DEFAULTS = GenerationSettings()
# Measured (docs/slot_filling.md, "The default"): asking gains where a value was left out, but a model that answers
# right loses right answers to it, because a value the model derives ("2023-06-30" for "June 30", 1000 for "1 km")
# is a value nobody gave. Through the rule, the answer keys themselves lose 15 to 29 points of BFCL's categories
# and 6 to 21 of HammerBench's ST_Perfect and ST_External (benchmarks/ask_or_call_gold.py), against the 1 allowed.
# So the engine calls by default; hammer call and hammer chat, where a person reads the answer, ask.
DEFAULT_ON_MISSING = "call"


class EngineFields(BaseModel):
    """The declaration of every engine setting (see the module); :class:`~hammer_plugins.engine.settings.EngineSettings`
    adds how an engine is built from them.

    Example:
        >>> EngineFields(n_ctx=4096).n_ctx, EngineFields.model_fields["n_ctx"].description
        (4096, 'Context window in tokens (llama.cpp, transformers).')
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, protected_namespaces=())

    # --- the model
    model_path: str | Path | None = Field(
        default=None, description="A .gguf file (llama.cpp) or checkpoint directory (transformers); with "
                                  "model unset too: $HAMMER_MODEL_PATH, $HAMMER_MODEL, the best Hammer model "
                                  "pulled here (llama.cpp), else the embedded default model.",
        json_schema_extra={"flag": "--model-path",
                           "flag_help": "a .gguf file (or checkpoint directory); default: $HAMMER_MODEL_PATH, "
                                        "$HAMMER_MODEL, the best Hammer model pulled here, else the embedded "
                                        "stand-in"})
    model: str | None = Field(default=None, description="A preset ('hammer2.1-1.5b'), a Hugging Face repo ('owner/repo', "
                                                        "'owner/repo:Q4_K_M', 'owner/repo/file.gguf'), a local "
                                                        "directory or a .gguf path.",
        json_schema_extra={"flag": "--model",
                           "flag_help": "a preset (hammer2.1-1.5b; `hammer models` lists them), a Hugging Face repo "
                                        "('owner/repo', 'owner/repo:Q4_K_M', 'owner/repo/file.gguf') or a local "
                                        "directory"})
    # The names are the registry's (backends/registry.py), the default its first.
    backend: Literal[BACKEND_NAMES] | BackendInterface = Field(  # type: ignore[valid-type]
        default="llama_cpp", description=f"One of {describe_backends()}; or a hammer_plugins Backend instance.",
        json_schema_extra={"flag": "--backend", "flag_help": describe_backends()})
    base_url: str | None = Field(default=None, description="backend='server': the server's URL, e.g. "
                                                           "http://127.0.0.1:8080/v1.",
        json_schema_extra={"flag": "--base-url", "flag_help": "--backend server: the server's URL, e.g. http://127.0.0.1:8080/v1"})
    api_key: SecretStr | None = Field(default=None, description="backend='server': its bearer token.")
    timeout: float | None = Field(default=None, description="backend='server': the longest silence allowed, in s.")
    max_retries: int | None = Field(default=None, description="backend='server': retries of connection failures "
                                                              "and 429/502/503/504.")
    # --- Hammer behaviour
    prompt_format: Literal["hammer2.1", "hammer2.0", "hammer1.0"] | None = Field(
        default=None, description="The prompt layout the checkpoint was trained on; None: the named model's "
                                  "(a Hammer 2.0 or 1.0 preset has its own), else hammer2.1.",
        json_schema_extra={"flag": "--prompt-format", "flag_help": "default: the model's own (a preset's), else hammer2.1"})
    constrained: bool = Field(default=True, description="Constrain decoding with a grammar built from the tools.",
        json_schema_extra={"flag": "--no-constrained", "flag_help": "turn constrained decoding off"})
    mask_names: bool = Field(default=False, description="Show the model opaque function and parameter names; "
                                                        "calls come back with the real ones.",
        json_schema_extra={"flag": "--mask-names", "flag_help": "mask function and parameter names"})
    on_refusal: Literal["message", "answer", "raise"] = Field(
        default="message", description="What Hammer's [] (no suitable tool) becomes: refusal_text, a tool-free "
                                       "answer, or RefusalError.")
    refusal_text: str = Field(default=DEFAULT_REFUSAL_TEXT, description="The text of a refusal.")
    on_missing: Literal["ask", "call", "error"] = Field(
        default=DEFAULT_ON_MISSING,
        description="What a proposed call becomes when nobody gave one of its required values (the user did not say "
                    "it, no tool result holds it, the schema has no default): 'ask' holds it back and asks for the "
                    "values (the next turn completes it), 'call' sends it as the model wrote it, 'error' raises "
                    "MissingArgumentsError (docs/slot_filling.md).",
        json_schema_extra={"flag": "--on-missing",
                           "flag_help": "a call missing a required value nobody gave: ask for it, call anyway, or "
                                        "error (default: %(default)s; docs/slot_filling.md)"})
    max_tool_rounds: int | None = Field(
        default=DEFAULT_MAX_TOOL_ROUNDS, ge=1,
        description="Rounds of tool calls per user turn (per agent) before the model answers from the results without "
                    "tools; None: no cap.")
    tool_budget: int = Field(
        default=DEFAULT_TOOL_BUDGET, ge=0,
        description="Prompt tokens the tools block may take (estimated: about 3.5 characters a token); a larger tool "
                    "set is narrowed to the tools whose descriptions best match the conversation (docs/tools.md). 0: "
                    "offer every tool.",
        json_schema_extra={"flag": "--tool-budget",
                           "flag_help": "prompt tokens (estimated, about 3.5 characters a token) the tools block may "
                                        "take before the tools that best match the conversation are selected "
                                        "(default: %(default)s; 0: offer every tool)"})
    tool_selector: Any = Field(
        default="meaning",
        description="Who chooses the tools a call offers when a tool set is over the tool budget: 'meaning' "
                    "(multilingual embeddings fused with BM25), 'bm25' (words only), or your own selector object or "
                    "function (docs/tools.md).",
        json_schema_extra={"flag": "--tool-selector", "choices": ["meaning", "bm25"],
                           "flag_help": "who chooses the tools offered when the tool set is over --tool-budget: "
                                        "meaning (multilingual embeddings with BM25) or bm25 (words only) "
                                        "(default: %(default)s)"})
    relevance_gate: bool = Field(
        default=False, description="Answer Hammer's refusal without running the model when no tool shares a word "
                                   "with the question (tool_choice auto; docs/tools.md has its measured effect).",
        json_schema_extra={"flag": "--relevance-gate",
                           "flag_help": "refuse without running the model when no tool shares a word with the question"})

    @field_serializer("tool_selector", when_used="json")
    def _selector_name(self, value: Any) -> str:
        # A caller's selector object is not JSON: its class name says which one it was (LangChain's and
        # LlamaIndex's JSON dumps of a chat model must not fail on it).
        return value if isinstance(value, str) else type(value).__qualname__

    # --- sampling
    max_tokens: int = Field(default=_DEFAULTS.max_tokens, gt=0, description="Most tokens to generate.",
        json_schema_extra={"flag": "--max-tokens", "flag_help": "default: %(default)s"})
    temperature: float = Field(default=_DEFAULTS.temperature, ge=0.0, description="0 is greedy decoding.")
    top_p: float = Field(default=_DEFAULTS.top_p, gt=0.0, le=1.0, description="Nucleus sampling mass (1.0: off).")
    top_k: int = Field(default=_DEFAULTS.top_k, ge=0, description="Top-k sampling (0: off).")
    repeat_penalty: float = Field(default=_DEFAULTS.repeat_penalty, gt=0.0,
                                  description="Penalty on repeated tokens (llama.cpp; 1.0: off).")
    loop_guard: bool = Field(default=_DEFAULTS.loop_guard, description="Close a string argument the model repeats "
                                                                      "itself in (constrained, local backends).")
    seed: int | None = Field(default=_DEFAULTS.seed, description="Sampling seed (only matters when temperature > 0).")
    # --- the in-process backends
    n_ctx: int = Field(default=BACKEND_DEFAULTS.n_ctx, gt=0,
                       description="Context window in tokens (llama.cpp, transformers).",
        json_schema_extra={"flag": "--n-ctx"})
    n_threads: int | None = Field(default=None, description="llama.cpp decode threads (None: one per physical core).",
        json_schema_extra={"flag": "--threads", "dest": "threads",
                           "flag_help": "llama.cpp decode threads (default: one per physical core, as llama.cpp's "
                                        "own tools)"})
    n_gpu_layers: int = Field(default=BACKEND_DEFAULTS.n_gpu_layers,
                              description="Layers llama.cpp offloads to a GPU build (-1: all).")
    device: str = Field(default=BACKEND_DEFAULTS.device, description="transformers device: auto, cpu, cuda, mps.")
    dtype: str = Field(default=BACKEND_DEFAULTS.dtype,
                       description="transformers dtype: auto (float32 on CPU, bfloat16 on GPU).")
    prefix_cache: bool | str | Path = Field(
        default=True, description="llama.cpp: keep the KV state of prompt prefixes (the tools block and the caller's "
                                  "instructions) on disk, so later turns, sessions and processes skip them (True: "
                                  "$HAMMER_CACHE_DIR/prefix-kv, or a folder; False: off).")
    cache_ram: int = Field(
        default=BACKEND_DEFAULTS.cache_ram, ge=0,
        description="llama.cpp: MiB of memory for the KV states of recent prompts; a request restores the one "
                    "sharing its longest prefix, whichever request left it (least recently used evicted; 0: off).")
    model_kwargs: dict[str, Any] = Field(default_factory=dict, description="Anything else for the backend "
                                                                         "(llama_cpp.Llama or from_pretrained options).")


DEFAULTS = EngineFields()
"""The declared defaults, for signatures that spell their keyword arguments out (``HammerEngine``)."""
