"""Two independent engines that say whether a grammar accepts a text, token by token over a real vocabulary.

* :func:`lark_accepts`: llguidance on the grammar's Lark notation (what both local backends decode with);
  :func:`lark_accepts_each` the same for many texts under one grammar; :func:`mask_accepts` through the
  engine's token mask, loop guard included (:func:`mask_refuses_at`: where it refuses a text);
* :class:`LlamaCppGrammar`: llama.cpp's own grammar sampler (no lexer) on the GBNF notation (what the
  servers receive), driven through its C API one candidate token at a time.

:data:`FORMAT_CHECKER` is ``jsonschema``'s format checker with the formats the grammar enforces that it
cannot check without extra packages (date-time, time, uri) added, and a stricter email.
"""

from __future__ import annotations

import ctypes
import datetime
import re
from typing import Any

import jsonschema
import llguidance

from hammer_plugins.grammar.builder import Grammar

# ------------------------------------------------------------------ formats
# jsonschema's FormatChecker checks date, email, ipv4 and uuid with the standard library; date-time,
# time and uri need packages this project does not install (rfc3339-validator, rfc3987), so the oracle
# adds them here from RFC 3339 section 5.6 and RFC 3986 section 3, independently of the engine's regexes.
FORMAT_CHECKER = jsonschema.FormatChecker()  # a copy: the additions stay out of jsonschema's shared checker
_RFC3339_TIME = re.compile(r"(\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-](\d\d):(\d\d))\Z", re.ASCII)
RFC3986_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?#\[\]]|%[0-9A-Fa-f]{2})*\Z")


def _full_time(text: str) -> bool:
    found = _RFC3339_TIME.match(text)
    if not found:
        return False
    hour, minute, second = int(found[1]), int(found[2]), int(found[3])
    offset_ok = found[6] is None or (int(found[6]) <= 23 and int(found[7]) <= 59)
    return hour <= 23 and minute <= 59 and second <= 60 and offset_ok


@FORMAT_CHECKER.checks("time")
def _time(value: object) -> bool:
    return not isinstance(value, str) or _full_time(value)


@FORMAT_CHECKER.checks("date-time")
def _date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    date, sep, time = value[:10], value[10:11], value[11:]
    try:
        ok_date = re.fullmatch(r"\d{4}-\d\d-\d\d", date, re.ASCII) and datetime.date.fromisoformat(date)
    except ValueError:
        return False
    return bool(ok_date) and sep in "Tt" and sep != "" and _full_time(time)


@FORMAT_CHECKER.checks("uri")
def _uri(value: object) -> bool:
    return not isinstance(value, str) or bool(RFC3986_URI.match(value))


@FORMAT_CHECKER.checks("email")
def _email(value: object) -> bool:
    # RFC 5322's dot-atom local part and a hostname domain (jsonschema's own check is "contains @").
    atom = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
    label = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
    return not isinstance(value, str) or bool(re.fullmatch(rf"{atom}(?:\.{atom})*@{label}(?:\.{label})*", value))




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
    from hammer_plugins.grammar.token_mask import TokenMask

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
    from hammer_plugins.grammar.token_mask import TokenMask

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
