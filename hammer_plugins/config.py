"""One configuration for every entry point: the engine's settings, declared once.

``ChatHammer`` and ``HammerLLM`` inherit :class:`EngineSettings` (so both adapters take the same
field names, defaults and validation, server options included), the ``hammer`` command builds one
from its options (:func:`add_engine_arguments`, :meth:`EngineSettings.from_args`), and every entry
point turns it into an engine the same way (:meth:`EngineSettings.build_engine`), sharing one engine per
configuration in the process (engines are light; the loaded model is shared by backend settings).

Example:
    >>> settings = EngineSettings(max_tokens=128, mask_names=True)
    >>> engine = settings.build_engine()
    >>> engine is EngineSettings(max_tokens=128, mask_names=True).build_engine(), engine.mask_names
    (True, True)
"""

from __future__ import annotations

import argparse
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from .backends.base import Backend, GenerationSettings
from .prompt import PROMPT_FORMATS
from .response import DEFAULT_REFUSAL_TEXT

if TYPE_CHECKING:
    from .engine import HammerEngine

_DEFAULTS = GenerationSettings()
SERVER_OPTIONS = ("base_url", "api_key", "timeout", "max_retries")
"""The settings that only an inference server (``backend="server"``) reads."""


class EngineSettings(BaseModel):
    """Every setting of a :class:`~hammer_plugins.HammerEngine`, declared once for all entry points.

    Example:
        >>> EngineSettings(backend="server", base_url="http://127.0.0.1:8080/v1").engine_options()["base_url"]
        'http://127.0.0.1:8080/v1'
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, protected_namespaces=())

    # --- the model
    model_path: str | Path | None = Field(
        default=None, description="A .gguf file (llama.cpp) or checkpoint directory (transformers); with "
                                  "model unset too, the embedded default model.")
    model: str | None = Field(default=None, description="A preset ('hammer2.1-1.5b'), a Hugging Face repo ('owner/repo', "
                                                        "'owner/repo:Q4_K_M', 'owner/repo/file.gguf'), a local "
                                                        "directory or a .gguf path.")
    backend: Literal["llama_cpp", "transformers", "server"] | Backend = Field(
        default="llama_cpp", description="'llama_cpp', 'transformers', 'server' (an OpenAI-compatible inference "
                                         "server, docs/server.md) or a hammer_plugins Backend instance.")
    base_url: str | None = Field(default=None, description="backend='server': the server's URL, e.g. "
                                                           "http://127.0.0.1:8080/v1.")
    api_key: SecretStr | None = Field(default=None, description="backend='server': its bearer token.")
    timeout: float | None = Field(default=None, description="backend='server': the longest silence allowed, in s.")
    max_retries: int | None = Field(default=None, description="backend='server': retries of connection failures "
                                                              "and 429/502/503/504.")
    # --- Hammer behaviour
    prompt_format: Literal["hammer2.1", "hammer2.0", "hammer1.0"] | None = Field(
        default=None, description="The prompt layout the checkpoint was trained on; None: the named model's "
                                  "(a Hammer 2.0 or 1.0 preset has its own), else hammer2.1.")
    constrained: bool = Field(default=True, description="Constrain decoding with a grammar built from the tools.")
    mask_names: bool = Field(default=False, description="Show the model opaque function and parameter names; "
                                                        "calls come back with the real ones.")
    on_refusal: Literal["message", "answer", "raise"] = Field(
        default="message", description="What Hammer's [] (no suitable tool) becomes: refusal_text, a tool-free "
                                       "answer, or RefusalError.")
    refusal_text: str = Field(default=DEFAULT_REFUSAL_TEXT, description="The text of a refusal.")
    max_tool_rounds: int | None = Field(
        default=1, ge=1, description="Rounds of tool calls per user turn (per agent) before the model answers "
                                     "from the results without tools; None: no cap.")
    # --- sampling
    max_tokens: int = Field(default=_DEFAULTS.max_tokens, gt=0, description="Most tokens to generate.")
    temperature: float = Field(default=_DEFAULTS.temperature, ge=0.0, description="0 is greedy decoding.")
    top_p: float = Field(default=_DEFAULTS.top_p, gt=0.0, le=1.0, description="Nucleus sampling mass (1.0: off).")
    top_k: int = Field(default=_DEFAULTS.top_k, ge=0, description="Top-k sampling (0: off).")
    repeat_penalty: float = Field(default=_DEFAULTS.repeat_penalty, gt=0.0,
                                  description="Penalty on repeated tokens (llama.cpp; 1.0: off).")
    loop_guard: bool = Field(default=_DEFAULTS.loop_guard, description="Close a string argument the model repeats "
                                                                      "itself in (constrained, local backends).")
    seed: int | None = Field(default=_DEFAULTS.seed, description="Sampling seed (only matters when temperature > 0).")
    # --- runtime
    n_ctx: int = Field(default=8192, gt=0, description="Context window in tokens (llama.cpp, transformers).")
    n_threads: int | None = Field(default=None, description="llama.cpp decode threads (None: one per physical core).")
    n_gpu_layers: int = Field(default=0, description="Layers llama.cpp offloads to a GPU build (-1: all).")
    device: str = Field(default="auto", description="transformers device: auto, cpu, cuda, mps.")
    dtype: str = Field(default="auto", description="transformers dtype: auto (float32 on CPU, bfloat16 on GPU).")
    prefix_cache: bool | str | Path = Field(
        default=False, description="llama.cpp: keep the KV state of the tools prefix on disk across processes "
                                   "(True: $HAMMER_CACHE_DIR/prefix-kv, or a folder). On in the hammer command.")
    model_kwargs: dict[str, Any] = Field(default_factory=dict, description="Anything else for the backend "
                                                                         "(llama_cpp.Llama or from_pretrained options).")

    def engine_options(self, model: str | None = None) -> dict[str, Any]:
        """The keyword arguments of :class:`~hammer_plugins.HammerEngine` for these settings.

        ``model`` (a per-call override) replaces ``model`` and ``model_path``. Server options are
        passed only to the server backend.
        """
        options: dict[str, Any] = {name: getattr(self, name) for name in _ENGINE_FIELDS}
        if model:
            options.update(model=model, model_path=None)
        options.update(self.model_kwargs)
        if self.backend == "server":
            options.update({k: getattr(self, k) for k in SERVER_OPTIONS if getattr(self, k) is not None})
        return options

    def build_engine(self, model: str | None = None) -> HammerEngine:
        """The engine for these settings (one per configuration in the process: its caches are kept)."""
        from .engine import HammerEngine

        options = self.engine_options(model)
        key = repr(sorted((k, _key_part(v)) for k, v in options.items()))
        with _LOCK:
            engine = _ENGINES.get(key)
            if engine is not None:
                _ENGINES.move_to_end(key)
                return engine
        engine = HammerEngine(**options)
        with _LOCK:
            _ENGINES[key] = engine
            while len(_ENGINES) > 64:
                _ENGINES.popitem(last=False)
        return engine

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EngineSettings:
        """The settings of the ``hammer`` command's engine options (:func:`add_engine_arguments`)."""
        return cls(model_path=args.model_path, model=args.model, backend=args.backend, base_url=args.base_url,
                   prompt_format=args.prompt_format, constrained=not args.no_constrained, mask_names=args.mask_names,
                   max_tokens=args.max_tokens, n_ctx=args.n_ctx, n_threads=args.threads,
                   on_refusal=getattr(args, "on_refusal", "message"),
                   prefix_cache=getattr(args, "prefix_cache", False))


def _key_part(value: Any) -> Any:
    """A value as part of an engine's cache key: equal settings give equal keys, objects by identity."""
    if isinstance(value, SecretStr):
        return ("secret", value.get_secret_value())
    if isinstance(value, str | int | float | bool | None):
        return value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict | list | tuple):
        return ("value", repr(value))
    return ("object", id(value))


_ENGINE_FIELDS = tuple(name for name in EngineSettings.model_fields if name not in (*SERVER_OPTIONS, "model_kwargs"))
_ENGINES: OrderedDict[str, HammerEngine] = OrderedDict()
_LOCK = threading.Lock()


def add_concurrency_argument(parser: argparse.ArgumentParser) -> None:
    """``--concurrency N``: questions in flight at once, for evaluators run against a server with N slots.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_concurrency_argument(parser)
        >>> parser.parse_args(["--concurrency", "4"]).concurrency
        4
    """
    parser.add_argument("--concurrency", type=int, default=1, metavar="N",
                        help="questions in flight at once (default: 1). Pays with --backend server on a server with "
                             "several slots (`hammer serve --parallel N`); a local model answers one at a time")


def add_engine_arguments(parser: argparse.ArgumentParser, max_tokens: int = 512, prefix_cache: bool = False) -> None:
    """The model and decoding options every ``hammer`` subcommand shares (read by :meth:`EngineSettings.from_args`).

    ``prefix_cache`` is the default of the on-disk prefix cache: on for one-shot commands that
    repeat a tool set across runs (``hammer call``), off for evaluators that see a new one per question.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_engine_arguments(parser)
        >>> EngineSettings.from_args(parser.parse_args(["--threads", "2"])).n_threads
        2
    """
    parser.add_argument("--model-path", help="a .gguf file (or checkpoint directory); default: the embedded model")
    parser.add_argument("--model", help="a preset (hammer2.1-1.5b; `hammer models` lists them), a Hugging Face repo "
                        "('owner/repo', 'owner/repo:Q4_K_M', 'owner/repo/file.gguf') or a local directory")
    parser.add_argument("--backend", default="llama_cpp", choices=["llama_cpp", "transformers", "server"])
    parser.add_argument("--base-url", help="--backend server: the server's URL, e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--prompt-format", default=None, choices=list(PROMPT_FORMATS),
                        help="default: the model's own (a preset's), else hammer2.1")
    parser.add_argument("--no-constrained", action="store_true", help="turn constrained decoding off")
    parser.add_argument("--mask-names", action="store_true", help="mask function and parameter names")
    parser.add_argument("--max-tokens", type=int, default=max_tokens, help="default: %(default)s")
    parser.add_argument("--n-ctx", type=int, default=8192)
    where = "$HAMMER_CACHE_DIR/prefix-kv; `hammer cache clear` empties it"
    if prefix_cache:
        parser.add_argument("--no-prefix-cache", dest="prefix_cache", action="store_false",
                            help=f"do not keep the tools prefix's KV state on disk (llama.cpp; kept in {where})")
    else:
        parser.add_argument("--prefix-cache", action="store_true",
                            help=f"keep the tools prefix's KV state on disk for later runs (llama.cpp; {where})")
    parser.add_argument("--threads", type=int, default=None,
                        help="llama.cpp decode threads (default: one per physical core, as llama.cpp's own tools)")
