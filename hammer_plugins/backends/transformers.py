"""transformers backend: a checkpoint directory, a hub id, or a GGUF file via ``gguf_file``.

Grammars are enforced with llguidance (a token mask per step, from the same GBNF text the
llama.cpp backend uses). The KV cache of the previous call is kept and cropped to the common
prefix, so turns of one conversation only evaluate what is new.

A GGUF is dequantized by transformers on load (slow: tens of seconds); the result is saved once
under the cache directory and later loads read that checkpoint.

Example:
    >>> from hammer_plugins.backends.transformers import TransformersBackend
    >>> backend = TransformersBackend(model="MadeAgents/Hammer2.1-0.5b")   # nothing loaded yet
    >>> backend.name
    'transformers'
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hammer_plugins.backends.base import BACKEND_DEFAULTS, Backend, GenerationChunk, GenerationSettings, Usage, tokenize_prompt
from hammer_plugins.grammar.builder import Grammar
from hammer_plugins.grammar.token_mask import TokenMask, import_llguidance
from hammer_plugins.models.source import ModelSource, check_gguf, resolve_model
from hammer_plugins.output.decoding import Decoding
from hammer_plugins.output.timings import Timings
from hammer_plugins.prompt.render import STOP_SEQUENCES
from hammer_plugins.support.cache_location import cache_dir
from hammer_plugins.values.errors import BackendNotInstalledError, InvalidModelFileError, ModelNotFoundError


def _imports() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise BackendNotInstalledError(
            "the transformers backend needs torch and transformers. Fix: pip install "
            "'hammer-plugins[transformers]' (on CPU-only machines install torch's CPU build first)"
        ) from exc
    return torch, transformers


def _load_options(revision: str | None) -> dict[str, Any]:
    """``from_pretrained``'s options: the revision, and ``local_files_only`` under ``HF_HUB_OFFLINE=1``, read
    now: huggingface_hub reads it once, at its import, so one set later in a process (a notebook, a test)
    went unheeded and the load waited on the network until it timed out."""
    options: dict[str, Any] = {"revision": revision} if revision else {}
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        options["local_files_only"] = True
    return options


class TransformersBackend(Backend):
    """Runs a Hugging Face causal LM with transformers.

    Args:
        model: hub id (uses the hub cache; offline with ``HF_HUB_OFFLINE=1``) or a local directory.
        model_path: a local ``.gguf`` file or checkpoint directory.
        device: ``"cpu"``, ``"cuda"``, ``"mps"`` or ``"auto"`` (a GPU if there is one).
        dtype: ``"auto"`` (float32 on CPU, bfloat16 on GPU), or a torch dtype name.
        revision: hub revision.
    """

    name = "transformers"
    # The full mask at every step, as the first constrained loop did: the old path, kept reachable for comparisons.
    _full_mask_decoding = False

    def __init__(
        self,
        model: str | None = None,
        *,
        model_path: str | Path | None = None,
        device: str = BACKEND_DEFAULTS.device,
        dtype: str = BACKEND_DEFAULTS.dtype,
        revision: str | None = None,
        source: ModelSource | None = None,
        n_ctx: int | None = None,
    ) -> None:
        super().__init__()
        self._source = source or resolve_model(model_path, model, gguf=False, revision=revision)
        self.device_option = device
        self.dtype_option = dtype
        self.revision = revision
        self.n_ctx = n_ctx
        self._model: Any = None
        self._tokenizer: Any = None
        self._ll_tokenizer: Any = None
        self._cache: Any = None
        self._cached_ids: list[int] = []
        self.load_seconds: float | None = None
        self.checkpoint: str | None = None  # what was loaded: a directory or hub id

    # ------------------------------------------------------------- loading
    @property
    def model_name(self) -> str:
        return self._source.display_name if self._source.is_default else self._source.short_name

    @property
    def context_window(self) -> int:
        self.load()
        configured = int(getattr(self._model.config, "max_position_embeddings", 32768))
        return min(configured, self.n_ctx) if self.n_ctx else configured

    @property
    def tokenizer(self) -> Any:
        self.load()
        return self._tokenizer

    def _device(self, torch: Any) -> str:
        if self.device_option != "auto":
            return self.device_option
        if torch.cuda.is_available():
            return "cuda"
        return "cpu"

    def _dtype(self, torch: Any, device: str) -> Any:
        if self.dtype_option == "auto":
            return torch.float32 if device == "cpu" else torch.bfloat16
        return getattr(torch, self.dtype_option)

    @property
    def source(self) -> ModelSource:
        """Where the model comes from (a directory, a hub checkpoint, a GGUF), resolved but not downloaded."""
        return self._source

    @property
    def is_loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        if self._model is not None:
            return
        torch, transformers = _imports()
        started = time.perf_counter()
        source = self._source
        if source.kind == "gguf":
            location = checkpoint_for_gguf(transformers, torch, check_gguf(Path(source.location)))
        elif source.kind == "directory":
            location = source.location
            if not (Path(location) / "config.json").is_file():
                raise InvalidModelFileError(
                    f"{location!r} is not a Hugging Face checkpoint directory (no config.json). Fix: pass "
                    "the directory written by save_pretrained, or a .gguf file with the llama.cpp backend."
                )
        else:
            location = source.location
        device = self._device(torch)
        kwargs = _load_options(self.revision)
        offline = "local_files_only" in kwargs
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(location, **kwargs)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                location, dtype=self._dtype(torch, device), **kwargs
            )
        except OSError as exc:
            raise ModelNotFoundError(
                f"could not load {location!r} with transformers ({exc}). Fix: check the hub id, or "
                + ("download it once with network access (HF_HUB_OFFLINE=1 is set), "
                   if offline else "make sure the hub is reachable, ")
                + "or pass a local checkpoint directory or .gguf file."
            ) from exc
        model.to(device)
        model.eval()
        self._tokenizer = tokenizer
        self._model = model
        self._device_name = device
        self.checkpoint = location
        self.load_seconds = time.perf_counter() - started

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text))

    def tokenize(self, text: str) -> list[int]:
        """Ids of ``text``: only the renderer's markers as special tokens (:func:`tokenize_prompt`);
        the text between them with ``split_special_tokens``, so a typed ``<|im_start|>`` stays text."""
        tokenizer = self.tokenizer

        def piece(segment: str, special: bool) -> list[int]:
            return list(tokenizer(segment, add_special_tokens=False, split_special_tokens=not special)["input_ids"])

        return tokenize_prompt(text, piece)

    # ------------------------------------------------------------- grammar
    def _token_mask(self, grammar: Grammar, loop_guard: bool) -> TokenMask:
        if self._ll_tokenizer is None:
            import_llguidance()
            from llguidance.hf import from_tokenizer

            vocab = int(self._model.get_output_embeddings().weight.shape[0])
            self._ll_tokenizer = from_tokenizer(self._tokenizer, n_vocab=vocab)
        return TokenMask(self._ll_tokenizer, grammar, loop_guard=loop_guard)

    # ----------------------------------------------------------- generation
    def _stop_ids(self) -> set[int]:
        ids = {self._tokenizer.eos_token_id} if self._tokenizer.eos_token_id is not None else set()
        for token in STOP_SEQUENCES:
            token_id = self._tokenizer.convert_tokens_to_ids(token)
            if isinstance(token_id, int) and token_id != self._tokenizer.unk_token_id:
                ids.add(token_id)
        return ids

    def _stream(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None) -> Iterator[GenerationChunk]:
        torch, transformers = _imports()
        self.load()
        tokenizer, model = self._tokenizer, self._model
        prompt_ids: list[int] = self.tokenize(prompt)  # user text stays text: only our markers are special
        mask = self._token_mask(grammar, settings.loop_guard) if grammar is not None else None
        stop_ids = self._stop_ids()
        generator = torch.Generator(device="cpu")
        if settings.seed is not None:
            generator.manual_seed(settings.seed)

        # Reuse the KV cache of the previous call up to the common prefix.
        common = 0
        for a, b in zip(self._cached_ids, prompt_ids, strict=False):
            if a != b:
                break
            common += 1
        common = min(common, len(prompt_ids) - 1)
        if self._cache is not None and common > 0:
            cache = self._cache
            surplus = cache.get_seq_length() - common
            if surplus > 0:
                cache.crop(-surplus)  # a negative count removes that many tokens (transformers 4 and 5)
        else:
            cache = transformers.DynamicCache()
            common = 0
        feed = prompt_ids[common:]
        ids = list(prompt_ids)
        held = common  # the cache holds ids[:held]
        forwarding = False
        started = time.perf_counter()
        first: float | None = None
        generated: list[int] = []
        emitted = ""
        finish = "length"
        try:
            with torch.inference_mode():
                for _ in range(settings.max_tokens):
                    self._check_cancel()  # between tokens: a cancelled call stops here
                    inputs = torch.tensor([feed], device=self._device_name)
                    forwarding = True
                    out = model(input_ids=inputs, past_key_values=cache, use_cache=True)
                    forwarding = False
                    cache = out.past_key_values
                    held += len(feed)
                    logits = out.logits[0, -1, :].float()
                    if settings.repeat_penalty != 1.0 and settings.repeat_last_n > 0:
                        # The same rule as llama.cpp: recent tokens' logits shrink towards "less likely".
                        recent = torch.tensor(sorted(set(ids[-settings.repeat_last_n:])), dtype=torch.long)
                        picked = logits[recent]
                        logits[recent] = torch.where(picked > 0, picked / settings.repeat_penalty,
                                                     picked * settings.repeat_penalty)
                    token = self._pick(torch, logits, settings, generator, mask)
                    if mask is not None:
                        mask.consume([token])
                    ids.append(token)
                    if token in stop_ids:
                        finish = "stop"
                        break
                    generated.append(token)
                    text = tokenizer.decode(generated, skip_special_tokens=False)
                    stop_at = min((text.find(s) for s in settings.stop if s and s in text), default=-1)
                    if stop_at >= 0:
                        text, finish = text[:stop_at], "stop"
                    if not text.endswith("\ufffd") and len(text) > len(emitted):
                        if first is None:
                            first = time.perf_counter()
                        yield GenerationChunk(text=text[len(emitted):])
                        emitted = text
                    if finish == "stop" or (mask is not None and mask.stopped):
                        finish = "stop"
                        break
                    feed = [token]
        finally:
            # Ended, cancelled or closed by the caller: remember exactly what the cache holds (the last
            # sampled token was never fed), so the next call reuses it; a forward pass cut short (an
            # interrupt inside the model) may have updated some layers only: start afresh then.
            if forwarding:
                self._cache, self._cached_ids = None, []
            else:
                self._cache, self._cached_ids = cache, ids[:held]
        done = time.perf_counter()
        yield GenerationChunk(
            text="",
            finish_reason="stop" if finish == "stop" else "length",
            usage=Usage(prompt_tokens=len(prompt_ids), completion_tokens=len(generated) + (finish == "stop"),
                        cached_prompt_tokens=common),
            timings=Timings(time_to_first_token=(first or done) - started, total=done - started),
            decoding=Decoding(**(mask.decoding() if mask is not None else {})),
        )

    def _pick(self, torch: Any, logits: Any, settings: GenerationSettings, generator: Any, mask: TokenMask | None) -> int:
        """The next token under the grammar: sample first, check after, where that is exact.

        Greedy: the unconstrained argmax, if the grammar allows it, is the masked argmax. Pure
        temperature sampling: a raw sample kept if allowed, else a sample from the masked
        distribution, gives each allowed token its masked probability p/Z (p, plus (1 - Z) p/Z
        through the resample). With top-k or top-p the truncation would see other tokens than under
        the mask, so the mask comes first there, as before; also with ``_full_mask_decoding``.
        """
        if mask is None:
            return sample(torch, logits, settings, generator)
        exact = settings.temperature <= 0 or (settings.top_k <= 0 and settings.top_p >= 1.0)
        if exact and not self._full_mask_decoding:
            token = sample(torch, logits, settings, generator)
            if mask.allows(token):
                return token
        masked = logits.masked_fill(torch.from_numpy(~mask.allowed(logits.shape[0])), float("-inf"))
        return sample(torch, masked, settings, generator)

    def info(self) -> dict[str, Any]:
        torch, transformers = _imports()
        return {**super().info(), "device": self.device_option, "dtype": self.dtype_option,
                "transformers": transformers.__version__, "torch": torch.__version__}


def checkpoint_for_gguf(transformers: Any, torch: Any, gguf: Path) -> str:
    """Dequantize a GGUF once and keep the checkpoint in the cache directory."""
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    target = cache_dir() / "transformers-from-gguf" / f"{gguf.stem}-{key}"
    if (target / "config.json").is_file() and (target / ".complete").is_file():
        return str(target)
    try:
        import gguf as _gguf  # noqa: F401
    except ImportError as exc:
        raise BackendNotInstalledError(
            "loading a GGUF with transformers needs the 'gguf' package. Fix: pip install "
            "'hammer-plugins[transformers]'"
        ) from exc
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    # transformers dequantizes GGUF weights to float32 on load, but leaves a quantizer marker
    # that refuses save_pretrained; the weights are plain tensors, so the marker can go.
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer = None
    if getattr(model.config, "quantization_config", None) is not None:
        del model.config.quantization_config
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(target))
    tokenizer.save_pretrained(str(target))
    (target / ".complete").write_text(str(gguf) + "\n")
    return str(target)


def sample(torch: Any, logits: Any, settings: GenerationSettings, generator: Any) -> int:
    """One token from ``logits``: greedy at temperature 0, else temperature, top-k and top-p as llama.cpp applies them."""
    if settings.temperature <= 0:
        return int(torch.argmax(logits).item())
    logits = logits / settings.temperature
    if settings.top_k > 0:
        kth = torch.topk(logits, min(settings.top_k, logits.shape[0])).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if settings.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < settings.top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_probs[keep])
        probs = probs / probs.sum()
    return int(torch.multinomial(probs, 1, generator=generator).item())
