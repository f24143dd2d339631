"""The regexes (and their replacements) that meet outside text run in linear time (issue 37, class 1).

Each one the audit rewrote is checked two ways: it gives what the old regex gave (generated inputs; the
old regex is kept here as the reference), and a crafted input that made the old one quadratic or worse
(measured: 40 kB in 12.9 s, 20 kB in 21 s, 40 kB in 23 s) finishes at a size hundreds of times larger,
with a backstop of many seconds of CPU rather than a tight timing.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from hammer_evals.bfcl.runners import _tagged_blocks
from hammer_plugins.http_api.guard import DEFAULT_ORIGINS, Guard, _matches, _pattern
from hammer_plugins.http_api.json_body import json_too_deep
from hammer_plugins.slot_filling.snapshots import _CLAUSE_END, slot_phrase

BACKSTOP_SECONDS = 20.0
SIZE = 2_000_000
OLD_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
OLD_CLAUSE_END = re.compile(
    r"(?<=[.;!?])\s|\n|\(|:|,?\s+(?:e\.g\.?|i\.e\.?|for example)(?=\W|$)|,\s*(?:such as|like|default)\b", re.IGNORECASE)
OLD_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
CASES = settings(max_examples=examples(400), deadline=None)


def bounded(work: Callable[[], object]) -> None:
    started = time.process_time()
    work()
    assert time.process_time() - started < BACKSTOP_SECONDS


# ------------------------------------------------------------------ the body's depth check (protocol.py)
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\[]{} \n', max_size=6),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                                      max_size=3), max_leaves=12)


@CASES
@given(json_values, st.integers(1, 6))
def test_the_depth_of_valid_json_is_read_as_before(value: object, limit: int) -> None:
    body = json.dumps(value).encode()
    old = OLD_JSON_STRING.sub(b"", body).translate(bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff"),
                                                    bytes(b for b in range(256) if b not in b"[]{}"))
    expected = bool(old) and max(itertools.accumulate(memoryview(old).cast("b"))) > limit
    assert json_too_deep(body, limit) is expected


@pytest.mark.parametrize("body", [b'"' + b'\\"' * (SIZE // 2), b'["' + b'\\"' * (SIZE // 2) + b"[" * 100,
                                  b'"\\' * (SIZE // 2), b'"' * SIZE])
def test_a_crafted_body_is_scanned_in_linear_time(body: bytes) -> None:
    bounded(lambda: json_too_deep(body))


def test_an_unclosed_string_hides_only_what_the_decoder_never_reaches() -> None:
    assert json_too_deep(b"[" * 100 + b'"', 64)
    assert not json_too_deep(b'["' + b"[" * 100, 64)  # not JSON: json.loads refuses it at the string


# ------------------------------------------------------------------ a description's first clause (snapshots.py)
@CASES
@given(st.lists(st.sampled_from([" ", "  ", ",", "e.g.", "i.e", "for example", "such as", "like", "default", "x",
                                 "Word", ".", "\n", "(", ":", "!", "\t"]), max_size=10).map("".join))
def test_the_first_clause_is_cut_where_the_old_regex_cut_it(text: str) -> None:
    assert _CLAUSE_END.split(text, maxsplit=1) == OLD_CLAUSE_END.split(text, maxsplit=1)


@pytest.mark.parametrize("description", ["a" + " " * SIZE + "b", ("x " * 10 + ", ") * (SIZE // 23), "," + " " * SIZE])
def test_a_crafted_description_is_cut_in_linear_time(description: str) -> None:
    bounded(lambda: slot_phrase("city", {"description": description}))


# ------------------------------------------------------------------ allowed origins (app.py)
@CASES
@given(st.sampled_from([*DEFAULT_ORIGINS, "http://*.example.com", "https://a*b*c.dev:*", "*x*", "x", "**"]),
       st.text(alphabet="abcx.:/*-", max_size=20))
def test_an_origin_matches_as_the_old_regex_matched(entry: str, origin: str) -> None:
    old = re.compile("^" + ".*".join(re.escape(part) for part in entry.split("*")) + "$")
    assert _matches(_pattern(entry), origin) is (old.match(origin) is not None)


def test_a_crafted_origin_is_matched_in_linear_time() -> None:
    guard = Guard(app=None, origins=["http://*.*.*.*.example.com"])  # type: ignore[arg-type]
    bounded(lambda: guard.origin_allowed("http://" + "." * SIZE))
    assert guard.origin_allowed("http://a.b.c.d.example.com") and not guard.origin_allowed("http://a.example.com")


# ------------------------------------------------------------------ BFCL's <tool_call> baseline (evals)
@CASES
@given(st.lists(st.sampled_from(["<tool_call>", "</tool_call>", " ", "\n", "x", "{}", "<tool_call"]), max_size=8)
       .map("".join))
def test_tool_call_blocks_are_found_as_the_old_regex_found_them(text: str) -> None:
    assert _tagged_blocks(text) == OLD_TAG.findall(text)


def test_a_crafted_model_output_is_split_in_linear_time() -> None:
    bounded(lambda: _tagged_blocks("<tool_call>a" + " " * SIZE + "b"))
