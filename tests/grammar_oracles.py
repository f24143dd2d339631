"""Two independent engines that say whether a grammar accepts a text, token by token over a real vocabulary.

* :func:`lark_accepts`: llguidance on the grammar's Lark notation (what both local backends decode with);
  :func:`lark_accepts_each` the same for many texts under one grammar; :func:`mask_accepts` through the
  engine's token mask, loop guard included (:func:`mask_refuses_at`: where it refuses a text);
* :class:`LlamaCppGrammar`: llama.cpp's own grammar sampler (no lexer) on the GBNF notation (what the
  servers receive), driven through its C API one candidate token at a time.
"""

from __future__ import annotations

import ctypes
from typing import Any

import llguidance

from hammer_plugins.grammar import Grammar


def lark_accepts(tokenizer: Any, grammar: Grammar | str, text: str) -> bool:
    """Whether llguidance accepts ``text`` (as the model's vocabulary tokenizes it) as a complete answer."""
    lark = grammar.lark if isinstance(grammar, Grammar) else grammar
    matcher = llguidance.LLMatcher(tokenizer, llguidance.grammar_from("lark", lark), log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    for token in tokenizer.tokenize_str(text):
        if not matcher.consume_token(token) or matcher.is_error():
            return False
    return bool(matcher.is_accepting())


def lark_accepts_each(tokenizer: Any, grammar: Grammar | str, texts: list[str]) -> list[bool]:
    """:func:`lark_accepts` for several texts under one grammar, compiled once (one matcher, reset between texts)."""
    lark = grammar.lark if isinstance(grammar, Grammar) else grammar
    matcher = llguidance.LLMatcher(tokenizer, llguidance.grammar_from("lark", lark), log_level=0)
    assert not matcher.is_error(), matcher.get_error()
    out = []
    for text in texts:
        matcher.reset()
        tokens = tokenizer.tokenize_str(text)
        out.append(matcher.try_consume_tokens(tokens) == len(tokens) and not matcher.is_error()
                   and bool(matcher.is_accepting()))
    return out


def mask_accepts(tokenizer: Any, grammar: Grammar | str, text: str) -> bool:
    """Whether decoding could write ``text``: every token allowed by the engine's :class:`TokenMask` (the
    grammar and the loop guard) when it comes, and the text a complete answer."""
    from hammer_plugins.token_mask import TokenMask

    mask = TokenMask(tokenizer, grammar)
    for token in tokenizer.tokenize_str(text):
        if not mask.allowed(tokenizer.vocab_size)[token]:
            return False
        mask.consume([token])
    return mask.accepting and not mask.loop_stopped


def mask_refuses_at(tokenizer: Any, grammar: Grammar | str, text: str) -> int | None:
    """Where the engine's :class:`TokenMask` (grammar and loop guard) first refuses ``text``: the offset, in
    characters of ``text``, of the first token it does not allow (the text before that token was written);
    ``len(text)`` when every token is allowed but the answer is not complete; None when it accepts it all."""
    from hammer_plugins.token_mask import TokenMask

    mask = TokenMask(tokenizer, grammar)
    written = b""
    for token in tokenizer.tokenize_str(text):
        if not mask.allowed(tokenizer.vocab_size)[token]:
            return len(written.decode("utf-8", errors="ignore"))
        mask.consume([token])
        written += tokenizer.decode_bytes([token])
    return None if mask.accepting and not mask.loop_stopped else len(text)


class LlamaCppGrammar:
    """llama.cpp's grammar sampler as an acceptance oracle for GBNF text.

    Each token is offered alone to the sampler's ``apply`` (a rejected token gets ``-inf``) and
    accepted only when allowed (llama.cpp aborts on accepting a forbidden token); the text is
    complete when an end-of-generation token is allowed after it.
    """

    def __init__(self, model_path: str) -> None:
        import llama_cpp

        self.llama_cpp = llama_cpp
        self.model = llama_cpp.Llama(model_path=model_path, vocab_only=True, verbose=False)
        self.vocab = llama_cpp.llama_model_get_vocab(self.model.model)
        self.end = next(t for t in range(llama_cpp.llama_vocab_n_tokens(self.vocab))
                        if llama_cpp.llama_vocab_is_eog(self.vocab, t))

    def tokenize(self, text: str) -> list[int]:
        return list(self.model.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def _allowed(self, sampler: Any, token: int) -> bool:
        llama_cpp = self.llama_cpp
        data = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(id=token, logit=0.0, p=0.0))
        array = llama_cpp.llama_token_data_array(data=data, size=1, selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
        return bool(data[0].logit > float("-inf"))

    def accepts(self, gbnf: str, text: str) -> bool:
        llama_cpp = self.llama_cpp
        sampler = llama_cpp.llama_sampler_init_grammar(self.vocab, gbnf.encode("utf-8"), b"root")
        assert sampler, "llama.cpp could not parse the grammar"
        try:
            for token in self.tokenize(text):
                if not self._allowed(sampler, token):
                    return False
                llama_cpp.llama_sampler_accept(sampler, token)
            return self._allowed(sampler, self.end)
        finally:
            llama_cpp.llama_sampler_free(sampler)
