"""llguidance's tokenizer for a GGUF model, built in a worker thread while the weights load, and the
vocabulary it is built from (kept in the prefix cache's store when there is one).

Example:
    >>> _unpack_vocabulary(_pack_vocabulary([b"a", b"bc"], [1]))
    ([b'a', b'bc'], [1])
"""

from __future__ import annotations

import ctypes
import json
import weakref
from array import array
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from hammer_plugins.backends.llama_cpp.native import import_llama_cpp
from hammer_plugins.grammar.builder import Grammar
from hammer_plugins.grammar.token_mask import TokenMask, import_llguidance

if TYPE_CHECKING:
    from hammer_plugins.backends.llama_cpp.model import LlamaCppModel


def _pack_vocabulary(tokens: list[bytes], ends: list[int]) -> bytes:
    head = array("I", [len(tokens), len(ends), *ends, *(len(t) for t in tokens)])
    return head.tobytes() + b"".join(tokens)


def _unpack_vocabulary(blob: bytes) -> tuple[list[bytes], list[int]]:
    """The vocabulary :func:`_pack_vocabulary` packed; ``ValueError`` for any other layout (a damaged file
    whose checksum still holds, or one from another version)."""
    if len(blob) < 8:
        raise ValueError("a vocabulary blob shorter than its counts")
    n_tokens, n_ends = array("I", blob[:8])
    start = 8 + 4 * (n_ends + n_tokens)
    if len(blob) < start:
        raise ValueError("a vocabulary blob shorter than its table")
    head = array("I", blob[8:start])
    ends, lengths = list(head[:n_ends]), head[n_ends:]
    if sum(lengths) != len(blob) - start or any(e >= n_tokens for e in ends):
        raise ValueError("a vocabulary blob whose table does not match its tokens")
    tokens, at = [], start
    for length in lengths:
        tokens.append(blob[at:at + length])
        at += length
    return tokens, ends


class LlamaCppVocabulary:
    """The tokenizer job of :class:`~hammer_plugins.backends.llama_cpp.LlamaCppBackend` (its ``vocabulary``):
    llguidance's tokenizer, which it owns, built from the model's file or loaded model (the vocabulary kept in
    the model's prefix cache).

    Example:
        >>> from hammer_plugins.backends.llama_cpp import LlamaCppBackend
        >>> LlamaCppBackend(n_ctx=4096).vocabulary.tokenizer is None   # built on the first constrained call
        True
    """

    def __init__(self, model: LlamaCppModel) -> None:
        self.model = model
        self.tokenizer: Any = None  # llguidance's LLTokenizer, once built
        self._job: Future[Any] | None = None

    def prepare(self) -> None:
        """Start building llguidance's tokenizer now, in a worker thread (once per loaded model).

        Called before the model is loaded, the worker reads the vocabulary from the GGUF file itself
        (a vocabulary-only llama.cpp model) while the main thread loads the weights: the build
        (about 0.6 s of CPU for a 152k vocabulary) then runs mostly on the core that loading
        leaves idle instead of competing with prompt evaluation, which uses every core.
        """
        if self.tokenizer is not None or self._job is not None:
            return
        if not self.model.is_loaded:
            import_llama_cpp()  # a missing llama-cpp-python is named here, as load() would
            self.model.gguf_path()  # resolve (and download) in the caller's thread, not twice
            # The worker's llama.cpp load logs as the model's own load will (llama-cpp-python's
            # Llama() sets this too, but only once it is called).
            from llama_cpp._logger import set_verbose

            set_verbose(bool(self.model.llama_kwargs.get("verbose", False)))
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hammer-tokenizer")
        self._job = pool.submit(self._build_tokenizer)
        pool.shutdown(wait=False)  # the job runs on; no other is taken

    def _build_tokenizer(self) -> Any:
        """The worker's job: the tokenizer, from the loaded model or else the file; ``None`` if the file's
        vocabulary cannot be loaded alone."""
        llama_cpp = import_llama_cpp()
        loaded = self.model.llama if self.model.is_loaded else None  # never loads the weights here
        vocab = llama_cpp.llama_model_get_vocab(loaded.model) if loaded is not None \
            else self._vocabulary_only_model(llama_cpp)
        return self._tokenizer_for(vocab) if vocab is not None else None

    def _tokenizer_for(self, vocab: Any) -> Any:
        import_llguidance()
        from llguidance import LLTokenizer

        llama_cpp = import_llama_cpp()
        tokens, ends = self._vocabulary(llama_cpp, vocab)
        tokenize = ctypes.cast(llama_cpp.llama_cpp._lib.llama_tokenize, ctypes.c_void_p).value
        # No slices: llguidance's slicer precomputes token classes (0.2 s of a 0.4 s build for a
        # 152k vocabulary, paid by every new process) to save about 0.03 ms a token afterwards.
        return LLTokenizer.from_llamacpp(tokens=tokens, vocab_ptr=vocab, tokenize_fptr=tokenize,
                                         eos_token=ends or None, slices=[])

    def _vocabulary_only_model(self, llama_cpp: Any) -> Any:
        """The vocabulary of the GGUF file, loaded without the weights; ``None`` if llama.cpp cannot.

        It lives as long as this component (as the backend): llguidance's tokenizer calls ``llama_tokenize`` on it.
        """
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        model = llama_cpp.llama_model_load_from_file(str(self.model.gguf_path()).encode(), params)
        if not model:
            return None  # the weights' own load reports what is wrong with the file
        weakref.finalize(self, llama_cpp.llama_model_free, model)
        return llama_cpp.llama_model_get_vocab(model)

    def token_mask(self, grammar: Grammar, loop_guard: bool) -> TokenMask:
        """A new token mask for ``grammar`` (waits for the tokenizer the first time)."""
        if self.tokenizer is None:
            self.prepare()
            assert self._job is not None
            try:
                tokenizer = self._job.result()
            finally:
                self._job = None  # built, or failed: a later call tries again
            # The file's vocabulary could not be read alone: the loaded model's (in this thread, so
            # that the weights are never loaded twice at once).
            self.tokenizer = tokenizer if tokenizer is not None else self._tokenizer_for(
                import_llama_cpp().llama_model_get_vocab(self.model.llama.model))
        return TokenMask(self.tokenizer, grammar, loop_guard=loop_guard)

    def _vocabulary(self, llama_cpp: Any, vocab: Any) -> tuple[list[bytes], list[int]]:
        """Every token's bytes as llguidance reads them, and the end-of-generation tokens.

        Reading 152k tokens through ctypes takes about 0.3 s, so with a prefix cache the result is
        kept in its vocabulary store (keyed by model file and runtime version), which a new tool set
        on the same model finds too. The reading gives what
        ``llguidance.llamacpp.lltokenizer_from_vocab`` reads, which returns only the finished
        tokenizer (nothing to store); a test checks every token against it.
        """
        prefix_cache = self.model.prefix_cache
        cache = prefix_cache.vocabularies() if prefix_cache is not None else None
        key = json.dumps([*self.model.file_id(), "vocabulary"]) if cache is not None else ""
        blob = cache.load(key, [0]) if cache is not None else None
        if blob is not None:
            try:
                return _unpack_vocabulary(blob)
            except ValueError:  # damaged: a miss, and the file goes
                cache.discard(key, [0])  # type: ignore[union-attr]
        n_tokens = llama_cpp.llama_vocab_n_tokens(vocab)
        buffer = ctypes.create_string_buffer(16 * 1024 + 1)
        address = ctypes.addressof(buffer)
        tokens: list[bytes] = []
        to_piece, get_attr, string_at = llama_cpp.llama_token_to_piece, llama_cpp.llama_vocab_get_attr, ctypes.string_at
        control, user_defined = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL, llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
        for token in range(n_tokens):
            # Without `special`, llama.cpp renders a control (or unknown) token as nothing and every
            # other token as with it; so only empty and <...> pieces need their attributes read,
            # which halves the native calls of this loop.
            size = to_piece(vocab, token, buffer, 16 * 1024, 0, False)
            piece = string_at(address, size) if size > 0 else b""
            if size <= 0 or (piece[:1] == b"<" and piece[-1:] == b">"):
                attr = get_attr(vocab, token)
                if size <= 0:
                    size = to_piece(vocab, token, buffer, 16 * 1024, 0, True)
                    piece = string_at(address, size) if size > 0 else b""
                # llguidance marks special tokens with a leading 0xff so that text can never produce them.
                if attr & control or (attr & user_defined and piece.startswith(b"<") and piece.endswith(b">")):
                    piece = b"\xff" + piece
            tokens.append(piece)
        # Every end-of-generation token may end a complete answer (as with llama.cpp's own grammar
        # sampler), not only the GGUF's EOS: a base-model GGUF's EOS is <|endoftext|>.
        ends = [t for t in range(n_tokens) if llama_cpp.llama_vocab_is_eog(vocab, t)]
        if cache is not None:
            cache.store(key, [0], _pack_vocabulary(tokens, ends))
        return tokens, ends
