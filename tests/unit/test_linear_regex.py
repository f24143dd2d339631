"""Regexes from outside run in linear time (issue 37, class 1): :mod:`hammer_plugins.support.linear_regex`.

* On patterns both engines read the same way, RE2 (through the translation) agrees with Python's ``re``
  (generated patterns and texts, hypothesis).
* ECMA-262's meanings, where Python's differ: ``$`` is the end of the text only, ``.`` leaves out every
  line terminator, ``\\d``/``\\w`` are ASCII, ``\\s`` holds ECMA's whitespace.
* Patterns that make a backtracking engine exponential finish on texts of a million characters (a
  backstop of many seconds: Python's ``re`` needs about 2**40 steps for the 44-character text).
* What an automaton cannot run is refused, naming the feature.
* The check after decoding (``keyword_violation``) and the server's crafted ``pattern`` request go through it.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from hammer_plugins.grammar.keyword_check import keyword_violation
from hammer_plugins.support import linear_regex
from hammer_plugins.support.linear_regex import UnsupportedPattern, compile_pattern, fullmatch, search, to_re2

BACKSTOP_SECONDS = 20.0  # a million characters take well under a second; backtracking would take years


# ------------------------------------------------------------------ generated patterns, both engines
# Texts: ASCII without \r (Python's `.` takes it, ECMA's does not) and without \v\f (ECMA's \s and
# Python's ASCII \s agree on the rest).
ALPHABET = "ab01_ -x\n"
ATOMS = ["a", "b", "0", "x", "-", " ", ".", r"\d", r"\w", r"\s", r"\D", r"\W", r"\S", "[ab]", "[^a]", "[0-9_]",
         "[a-]", r"\.", r"\-"]


@st.composite
def regexes(draw: Any, depth: int = 0) -> str:
    kind = draw(st.sampled_from(["atom", "atom", "seq", "alt", "repeat", "group"] if depth < 3 else ["atom"]))
    if kind == "atom":
        return draw(st.sampled_from(ATOMS))
    if kind == "seq":
        return "".join(draw(st.lists(regexes(depth + 1), min_size=2, max_size=3)))
    if kind == "alt":
        return "(?:" + "|".join(draw(st.lists(regexes(depth + 1), min_size=2, max_size=3))) + ")"
    if kind == "group":
        return "(" + draw(regexes(depth + 1)) + ")"
    inner = draw(regexes(depth + 1))
    quantifier = draw(st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}", "*?", "+?"]))
    return f"(?:{inner}){quantifier}"


@st.composite
def anchored(draw: Any) -> str:
    body = draw(regexes())
    return ("^" if draw(st.booleans()) else "") + body + ("$" if draw(st.booleans()) else "")


def python_reference(pattern: str, text: str) -> bool:
    # Python's `$` also matches before a final newline; ECMA's (and RE2's) only at the end: \Z is that.
    ecma = pattern[:-1] + r"\Z" if pattern.endswith("$") else pattern
    return re.search(ecma, text, flags=re.ASCII) is not None


@settings(max_examples=examples(400), deadline=None)
@given(anchored(), st.text(alphabet=ALPHABET, max_size=12))
def test_re2_agrees_with_python_re_on_patterns_both_read_alike(pattern: str, text: str) -> None:
    assert search(pattern, text) == python_reference(pattern, text), (pattern, text, to_re2(pattern))


@settings(max_examples=examples(200), deadline=None)
@given(regexes(), st.text(alphabet=ALPHABET, max_size=12))
def test_fullmatch_agrees_with_python_re(pattern: str, text: str) -> None:
    assert fullmatch(pattern, text) == (re.fullmatch(pattern, text, flags=re.ASCII) is not None)


# ------------------------------------------------------------------ ECMA-262's meanings
@pytest.mark.parametrize(("pattern", "text", "expected"), [
    ("^ab$", "ab\n", False),  # Python's re: True
    ("a.b", "a\rb", False), ("a.b", "a\u2028b", False), ("a.b", "a\u00e9b", True), ("a[^x]b", "a\nb", True),
    (r"\d", "\u0663", False),  # an Arabic-Indic digit: Python's re says True
    (r"\w", "\u00e9", False), (r"\bok\b", "b\u00e9ok", True),
    (r"^\s$", "\u00a0", True), (r"^\s$", "\ufeff", True), (r"^\s$", "\u2003", True), (r"^\S$", "\u200b", True),
    ("", "", True), ("x", "\ud800x", True), ("^[^a]$", "\ud800", True),  # a lone surrogate (JSON allows \ud800)
    ("[\u00e9-\u00ea]", "caf\u00e9", True), ("\U0001F600", "hi \U0001F600", True),
])
def test_ecma_meanings(pattern: str, text: str, expected: bool) -> None:
    assert search(pattern, text) is expected


# ------------------------------------------------------------------ exponential for a backtracking engine
@pytest.mark.parametrize("pattern", ["(a+)+b", "(a|a)*b", "(a*)*b", "(a|aa)+$", "^(\\w+\\s?)*$", "(.*a){20}x"])
def test_patterns_that_backtrack_exponentially_finish_on_a_million_characters(pattern: str) -> None:
    started = time.process_time()
    for text in ["a" * 40 + "c ab", "a" * 27 + "c ab", "a" * 1_000_000 + "!", ("a" * 100 + " ") * 10_000 + "!"]:
        if pattern.endswith("b"):  # each of these matches exactly where the text has a b
            expected = "b" in text
        else:  # words and single spaces up to the end: the two texts that end in "ab"
            expected = pattern == "^(\\w+\\s?)*$" and text.endswith("ab")
        assert search(pattern, text) is expected, (pattern, text[:50])
    assert time.process_time() - started < BACKSTOP_SECONDS


def test_the_check_after_decoding_uses_the_linear_engine() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "(a+)+b"}}}
    started = time.process_time()
    assert keyword_violation(schema, {"s": "a" * 27 + "c ab"}) is None  # contains a match
    broken = keyword_violation(schema, {"s": "a" * 200_000 + "c"})
    assert broken is not None and broken[:2] == ("s", "pattern")
    assert keyword_violation(schema, {"s": "a" * 40}) is not None
    assert time.process_time() - started < BACKSTOP_SECONDS
    email = {"type": "object", "properties": {"e": {"type": "string", "format": "email"}}}
    assert keyword_violation(email, {"e": "a@b.co"}) is None
    assert keyword_violation(email, {"e": "a" * 100_000 + "@" + "b-" * 100_000 + "!"})[1] == "format"


def test_python_re_is_not_used_for_values() -> None:
    """Reverting the check to ``re.search`` turns this red: the call would reach Python's regex engine."""
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": "^[a-z]+$"}}}

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("Python's re ran a pattern from outside")

    with pytest.MonkeyPatch.context() as patch:
        for name in ("search", "match", "fullmatch", "compile"):
            patch.setattr(re, name, refuse)
        assert keyword_violation(schema, {"s": "ok"}) is None
        assert keyword_violation(schema, {"s": "NO"})[1] == "pattern"


# ------------------------------------------------------------------ refused
@pytest.mark.parametrize(("pattern", "message"), [
    ("(a)\\1", "a back-reference, which a linear-time regex engine cannot run"),
    ("a(?=b)", "a lookaround"), ("a(?!b)", "a lookaround"), ("(?<=a)b", "a lookaround"), ("(?<!a)b", "a lookaround"),
    ("(?P<x>a)(?(x)b|c)", "a conditional group"), ("(?>a+)b", "an atomic group"), ("a++b", "a possessive repeat"),
    ("(?i)abc", "inline flags"), ("(?s:a.)", "inline flags"), ("[", "cannot read"),
    ("a{1001}", "repetition"), ("(a{100}){100}", "repetition"),
    ("x" * (linear_regex.MAX_PATTERN_CHARS + 1), "over the 10000 allowed"),
    ("(" * 300 + ")" * 300, "nested more than"),
])
def test_what_the_linear_engine_cannot_run_is_refused_by_name(pattern: str, message: str) -> None:
    with pytest.raises(UnsupportedPattern, match=re.escape(message)):
        compile_pattern(pattern)
