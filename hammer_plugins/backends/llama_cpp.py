"""llama.cpp backend (llama-cpp-python): a local GGUF file, grammars through llguidance, KV prefix reuse.

llama-cpp-python keeps the tokens of the previous call and re-evaluates only what differs, so
consecutive turns of one conversation (same tools block, longer history) skip the shared prefix.
One ``Llama`` instance is not re-entrant: calls are serialized by the backend lock. Grammars are
applied as an llguidance token mask (``token_mask``), not llama.cpp's own grammar sampler, which
is slower by about 15 ms a token on Qwen2.5's vocabulary.

Example:
    >>> from hammer_plugins.backends.llama_cpp import LlamaCppBackend
    >>> backend = LlamaCppBackend(n_ctx=4096)   # nothing is loaded yet
    >>> backend.name
    'llama_cpp'
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import BackendNotInstalledError, InvalidModelFileError
from ..grammar import Grammar
from ..model_source import ModelSource, check_gguf, fetch_gguf, resolve_model
from ..prompt import STOP_SEQUENCES
from ..token_mask import LogitsMask, TokenMask, import_llguidance
from .base import Backend, GenerationChunk, GenerationSettings, Usage


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise BackendNotInstalledError(
            "the llama.cpp backend needs llama-cpp-python. Fix: pip install 'hammer-plugins[llama-cpp]'"
        ) from exc
    return llama_cpp


class LlamaCppBackend(Backend):
    """Runs a GGUF model with llama-cpp-python.

    Args:
        model_path: a ``.gguf`` file; ``None`` resolves ``model`` or the default (see ``model_source``).
        model: a preset (``"hammer2.1-1.5b"``), ``"owner/repo:Q4_K_M"``, ``"owner/repo/file.gguf"`` or a path;
            a hub file is downloaded into the Hugging Face cache on first load (never at construction).
        n_ctx: context window in tokens.
        n_threads: CPU threads (``None``: llama.cpp's choice).
        n_gpu_layers: layers offloaded to a GPU build (0 on CPU).
        **llama_kwargs: any other ``llama_cpp.Llama`` argument, passed through.
    """

    name = "llama_cpp"

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model: str | None = None,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        source: ModelSource | None = None,
        **llama_kwargs: Any,
    ) -> None:
        super().__init__()
        self._source = source or resolve_model(model_path, model, gguf=True)
        if self._source.kind not in ("gguf", "hub_gguf"):
            raise InvalidModelFileError(
                f"the llama.cpp backend loads .gguf files, got {self._source.location!r}. Fix: pass a "
                ".gguf path, or use backend='transformers' for a checkpoint directory or hub id."
            )
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.n_gpu_layers = n_gpu_layers
        self.llama_kwargs = llama_kwargs
        self._llama: Any = None
        self._ll_tokenizer: Any = None
        self.load_seconds: float | None = None

    @property
    def model_name(self) -> str:
        return self._source.display_name if self._source.is_default else self._source.short_name

    @property
    def source(self) -> ModelSource:
        """Where the model comes from (a path, a preset, a hub file), resolved but not downloaded."""
        return self._source

    @property
    def model_path(self) -> str:
        return self._source.location

    @property
    def context_window(self) -> int:
        return int(self.llama.n_ctx())

    @property
    def llama(self) -> Any:
        """The loaded ``llama_cpp.Llama`` (loads on first access)."""
        if self._llama is None:
            self.load()
        return self._llama

    @property
    def is_loaded(self) -> bool:
        return self._llama is not None

    def load(self) -> None:
        if self._llama is not None:
            return
        llama_cpp = _import_llama_cpp()
        hub = self._source.kind == "hub_gguf"
        path = fetch_gguf(self._source) if hub else check_gguf(Path(self._source.location))
        started = time.perf_counter()
        try:
            self._llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_gpu_layers=self.n_gpu_layers,
                verbose=self.llama_kwargs.pop("verbose", False),
                **self.llama_kwargs,
            )
        except ValueError as exc:
            raise InvalidModelFileError(
                f"llama.cpp could not load {str(path)!r} ({exc}). The file is a GGUF but may be truncated, "
                "corrupt, or of an architecture this llama-cpp-python does not know. Fix: re-download "
                "the file" + (f" (`hammer pull {self._source.pull_name} --force`)" if hub else "")
                + ", or upgrade llama-cpp-python."
            ) from exc
        self.load_seconds = time.perf_counter() - started
        # Free the native model before interpreter shutdown: llama-cpp-python's own destructor
        # runs too late then and prints a TypeError traceback.
        weakref.finalize(self, self._llama.close)

    def _token_mask(self, grammar: Grammar, loop_guard: bool) -> TokenMask:
        if self._ll_tokenizer is None:
            # Reading the 152k-entry vocabulary takes about a second: once per loaded model.
            import_llguidance()
            from llguidance.llamacpp import lltokenizer_from_vocab

            llama_cpp = _import_llama_cpp()
            vocab = llama_cpp.llama_model_get_vocab(self.llama.model)
            n_vocab = self.llama.n_vocab()
            # Every end-of-generation token may end a complete answer (as with llama.cpp's own
            # grammar sampler), not only the GGUF's EOS: a base-model GGUF's EOS is <|endoftext|>.
            ends = [t for t in range(llama_cpp.llama_vocab_n_tokens(vocab)) if llama_cpp.llama_vocab_is_eog(vocab, t)]
            self._ll_tokenizer = lltokenizer_from_vocab(vocab, n_vocab=n_vocab, eos_token=ends or None)
        return TokenMask(self._ll_tokenizer, grammar, loop_guard=loop_guard)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text))

    def tokenize(self, text: str) -> list[int]:
        return list(self.llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _stream(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None) -> Iterator[GenerationChunk]:
        llama = self.llama
        prompt_tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        # llama-cpp-python re-evaluates only what differs from the previous call's tokens.
        previous = llama.input_ids[: llama.n_tokens].tolist()
        cached = 0
        for a, b in zip(previous, prompt_tokens, strict=False):
            if a != b:
                break
            cached += 1
        started = time.perf_counter()
        first: float | None = None
        pieces: list[str] = []
        finish: str | None = None
        kwargs: dict[str, Any] = {
            "max_tokens": settings.max_tokens,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "top_k": settings.top_k,
            "repeat_penalty": settings.repeat_penalty,
            "stop": [*STOP_SEQUENCES, *settings.stop],
            "stream": True,
        }
        if settings.seed is not None:
            kwargs["seed"] = settings.seed
        processor: LogitsMask | None = None
        if grammar is not None:
            processor = LogitsMask(self._token_mask(grammar, settings.loop_guard), len(prompt_tokens))
            kwargs["logits_processor"] = _import_llama_cpp().LogitsProcessorList([processor])
        for chunk in llama.create_completion(prompt_tokens, **kwargs):
            if processor is not None:
                processor.check()
            choice = chunk["choices"][0]
            text = choice.get("text") or ""
            if text:
                if first is None:
                    first = time.perf_counter()
                pieces.append(text)
                yield GenerationChunk(text=text)
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
        if processor is not None:
            processor.check()
        done = time.perf_counter()
        completion = "".join(pieces)
        n_completion = settings.max_tokens if finish == "length" else len(
            llama.tokenize(completion.encode("utf-8"), add_bos=False, special=True)
        ) + (1 if finish == "stop" else 0)
        yield GenerationChunk(
            text="",
            finish_reason="length" if finish == "length" else "stop",
            usage=Usage(prompt_tokens=len(prompt_tokens), completion_tokens=n_completion),
            timings={
                "time_to_first_token": (first or done) - started,
                "total": done - started,
                "cached_prompt_tokens": float(min(cached, len(prompt_tokens) - 1)),
                **(processor.mask.timings() if processor is not None else {}),
            },
        )

    def info(self) -> dict[str, Any]:
        llama_cpp = _import_llama_cpp()
        return {
            **super().info(),
            "model_path": self.model_path,
            "n_ctx": self.n_ctx,
            "n_gpu_layers": self.n_gpu_layers,
            "llama_cpp_python": getattr(llama_cpp, "__version__", "?"),
        }
