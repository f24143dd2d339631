"""The loop guard on the cases issue 24 reported, over the real Qwen2.5 vocabulary, and against every gold answer.

* Strings (:attr:`LoopGuard.looping`): realistic repetitive values are written whole, the loops the
  guard was built for (from the benchmark records in ``docs/benchmarks/``) are still cut, and soon.
* Call lists (:attr:`LoopGuard.list_looping`): a list that counts (``convert_time("14:30")``,
  ``("15:30")``, ...) is closed after its fifth call, and no gold call list of BFCL v4 (possible
  answers, every multi-turn turn) or of the academic sets is cut, in its own order or sorted either way.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import pytest
from grammar_oracles import mask_accepts, mask_refuses_at
from installed import require
from shared_data import academic_dir

from hammer_plugins import Tool
from hammer_plugins.grammar.builder import build_grammar
from hammer_plugins.grammar.loop_guard import LoopGuard

FREE = Tool(name="f", parameters={"type": "object", "properties": {"s": {"type": "string"}}, "required": ["s"]})

KEPT = {
    "40 =": "=" * 40,
    "40 -": "-" * 40,
    "an 80-column divider in a text": "Report\n" + "=" * 80 + "\nAll good.",
    "SHA-256 of zeros": "0" * 64,
    "SHA-512 of zeros": "0" * 128,
    "markdown separator row, 10 columns": "|---|" + "---|" * 9,
    "markdown separator row with spaces": "| " + "--- | " * 8,
    "markdown row of N/A": "| N/A " * 8 + "|",
    "laughter": "ha" * 20,
    "12 emoji": "\U0001f602" * 12,
    "nil UUID": "00000000-0000-0000-0000-000000000000",
    "40-char hex of one digit": "1" * 40,
    "40-char hex of repeated digits": "0123456789" * 4,
    "hex deadbeef": "deadbeef" * 8,
    "base64 of 64 zero bytes": "A" * 86 + "==",
    "dots": "Loading" + "." * 40,
    "stars": "* " * 20 + "*",
    "CSV row of zeros": ",".join(["0"] * 32),
    "CSV row of nulls": ",".join(["null"] * 20),
    "la la la": " ".join(["la"] * 15),
    "no no no": " ".join(["no"] * 12),
    "a phrase said three times": "Happy birthday! Happy birthday! Happy birthday!",
}

# (what comes before the loop, the repeated unit): loops from the benchmark records and the docs.
LOOPS = {
    "docs/engine.md: a sentence": ("", "Food Name should be Apple, and it was wrong before. "),
    "SmolLM2 live_relevance_0-0-0": ("Create a digital painting using the search engine's ", "AI-powered "),
    "SmolLM2 live_irrelevance_635-201-3": ("Movies_1", "_BuyMovieTickets"),
    "default live_multiple_253-117-0 (uuid)": ("5.1", ".0.0.0.1"),
    "after issue 12, live_multiple_253-117-0": ("5", ".0"),
    "SmolLM2 academic: MORROW_ROUTINE": ("MORROW_ROUTINE_1_2_1", "_2"),
    "SmolLM2 academic: manta ray ray": ("The species of the manta ray (e.g., manta ray", " ray"),
    "SmolLM2 academic: a variety of factors": ("A disease caused by ", "a variety of factors, including "),
    "SmolLM2 text: -classpath": ("javac ", "-classpath "),
    "SmolLM2 text: bash:": ("git+", "bash:"),
    "SmolLM2 text: #include lines": ("#include <iostream>\n", "#include <cstdlib>\n"),
    "SmolLM2 text: temperatures": ("approximately ", "2.3°C (3.6°F) "),
    "SmolLM2 text: 100.000...": ("100.", "0"),
    "SmolLM2 text: Produk ini": ("", "Produk ini masih tersedi.\n\n"),
    "a Korean phrase": ("", "에어컨, 냉방 실행, "),
}


def call_text(value: str, ascii_only: bool) -> str:
    return json.dumps([{"name": "f", "arguments": {"s": value}}], ensure_ascii=ascii_only)


@pytest.mark.parametrize("ascii_only", [False, True])
def test_realistic_repetitive_strings_are_written_whole(qwen_lltokenizer: Any, ascii_only: bool) -> None:
    grammar = build_grammar([FREE])
    refused = {name: mask_refuses_at(qwen_lltokenizer, grammar, call_text(value, ascii_only))
               for name, value in KEPT.items()}
    assert {name: at for name, at in refused.items() if at is not None} == {}


@pytest.mark.parametrize("ascii_only", [False, True])
def test_the_loops_from_the_records_are_still_cut(qwen_lltokenizer: Any, ascii_only: bool) -> None:
    """Each loop is cut inside its string: a phrase (8 characters or more, with a letter) after three
    repeats over 32 characters, any other unit once it runs over 128 characters."""
    grammar = build_grammar([FREE])
    start = len(call_text("", ascii_only)) - 4  # where the value starts
    late = {}
    for name, (before, unit) in LOOPS.items():
        value = before + unit * (400 // len(unit) + 1)
        text = call_text(value, ascii_only)
        at = mask_refuses_at(qwen_lltokenizer, grammar, text)
        assert at is not None and at > start, name
        written = json.loads('"' + text[start:at].rstrip("\\") + '"')  # the value written before the cut
        phrase = len(unit) >= LoopGuard.MIN_PHRASE and re.search(r"[^\W\d_]", unit) is not None
        bound = len(before) + (max(32, 3 * len(unit)) if phrase else LoopGuard.MAX_RUN + 1) + len(unit)
        if not value.startswith(written) or len(written) > bound:
            late[name] = (len(written), bound)
    assert late == {}


def test_escapes_are_read_as_the_characters_they_stand_for() -> None:
    guard = LoopGuard()
    guard.feed(b'{"a": "' + b"\\ud83d\\ude02" * 128)  # 128 emoji, each a surrogate pair: 1,536 bytes
    assert guard.in_string and not guard.looping
    guard.feed(b"\\ud83d\\ude02")
    assert guard.looping
    guard = LoopGuard()
    guard.feed(b'{"a": "say \\"' + b"wrong \\u00e9t\\u00e9! " * 3)  # "wrong été! " (11 characters) 3 times
    assert guard.looping
    guard.feed(b'"')
    assert not guard.in_string and not guard.looping


TIME = Tool(name="convert_time", parameters={"type": "object", "properties": {
    "time": {"type": "string"}, "to_zone": {"type": "string"}}, "required": ["time", "to_zone"]})
TAX = Tool(name="CalculateTax", parameters={"type": "object", "properties": {
    "annual_income": {"type": "number"}, "tax_rate": {"type": "number"}}, "required": ["annual_income", "tax_rate"]})


def counting(n: int, tool: str, make: Any) -> str:
    return json.dumps([{"name": tool, "arguments": make(i)} for i in range(n)])


@pytest.mark.parametrize(("tool", "make"), [
    ("convert_time", lambda i: {"time": f"{14 + i}:30", "to_zone": "UTC"}),
    ("convert_time", lambda i: {"time": f"2024-01-{1 + 2 * i:02d}T08:00", "to_zone": "UTC"}),
    ("CalculateTax", lambda i: {"annual_income": 10000 * (i + 1), "tax_rate": 0.15}),
    ("CalculateTax", lambda i: {"annual_income": 50000, "tax_rate": round(0.1 + 0.05 * i, 2)}),
])
def test_a_counting_call_list_is_closed_after_its_fifth_call(qwen_lltokenizer: Any, tool: str, make: Any) -> None:
    grammar = build_grammar([TIME, TAX])
    assert mask_accepts(qwen_lltokenizer, grammar, counting(5, tool, make))
    assert not mask_accepts(qwen_lltokenizer, grammar, counting(6, tool, make))


@pytest.mark.parametrize("calls", [
    [{"time": f"{12 + i}:30", "to_zone": "UTC"} for i in range(3)] + [{"time": "15:30", "to_zone": "CET"}]
    + [{"time": f"{16 + i}:30", "to_zone": "UTC"} for i in range(4)],  # another value changed: the count restarts
    [{"time": f"{14 + i}:{30 + i}", "to_zone": "UTC"} for i in range(7)],  # two numbers change
    [{"time": f"{h}:30", "to_zone": "UTC"} for h in (9, 10, 12, 13, 15, 16, 18)],  # not one step
])
def test_lists_that_do_not_count_are_left_open(calls: list[dict[str, Any]]) -> None:
    guard = LoopGuard()
    guard.feed(json.dumps([{"name": "convert_time", "arguments": c} for c in calls])[:-1].encode())
    assert not guard.list_looping


# Every gold call list ------------------------------------------------------------------------------

def _bfcl_lists() -> list[tuple[str, list[dict[str, Any]]]]:
    bfcl = require("hammer_evals.bfcl.bfcl", "hammer-evals")
    require("bfcl_eval", "bfcl-eval")
    base = bfcl.data_dir() / "possible_answer"
    out = []
    for path in sorted(base.glob("BFCL_v4_*.json")):
        for line in path.read_text(encoding="utf-8").splitlines():
            entry = json.loads(line)
            truth = entry["ground_truth"]
            if truth and isinstance(truth[0], list):  # multi-turn: each turn's calls, as Python call strings
                for turn, strings in enumerate(truth):
                    calls = []
                    for string in strings:
                        node = ast.parse(string, mode="eval").body
                        arguments = {f"_{i}": ast.literal_eval(a) for i, a in enumerate(node.args)}
                        arguments.update({k.arg: ast.literal_eval(k.value) for k in node.keywords})
                        calls.append({"name": ast.unparse(node.func), "arguments": arguments})
                    out.append((f"{entry['id']} turn {turn}", calls))
            elif truth and isinstance(truth[0], dict):  # possible answers: each argument's first value ("": left out)
                out.append((entry["id"], [
                    {"name": name, "arguments": {k: next(v for v in values if v != "")
                                                 for k, values in params.items() if any(v != "" for v in values)}}
                    for call in truth for name, params in call.items()]))
    return out


def _academic_lists() -> list[tuple[str, list[dict[str, Any]]]]:
    academic = require("hammer_evals.academic", "hammer-evals")
    return [(entry.key, entry.gold) for name in academic.SETS for entry in academic.load_set(academic_dir(), name)]


def _natural(call: dict[str, Any]) -> list[Any]:
    """A sort key that puts calls counting up next to each other in order (``"9"`` before ``"10"``)."""
    text = json.dumps(call, sort_keys=True, ensure_ascii=False)
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text)]


def _longest_counting_run(calls: list[dict[str, Any]]) -> int:
    """An independent reading of the rule: consecutive calls of one tool, same arguments but one, whose
    values are numbers (or strings equal but for one number) that change by the same step each time."""
    def value(v: Any) -> tuple[str, tuple[float, ...]] | None:
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return "", (v,)
        if isinstance(v, str):
            return re.sub(r"\d+", "#", v), tuple(int(n) for n in re.findall(r"\d+", v))
        return None

    best, run, last = 1, 1, None
    for a, b in zip(calls, calls[1:], strict=False):
        step = None
        changed = [k for k in b["arguments"] if b["arguments"][k] != a["arguments"].get(k)]
        if a["name"] == b["name"] and a["arguments"].keys() == b["arguments"].keys() and len(changed) == 1:
            va, vb = value(a["arguments"][changed[0]]), value(b["arguments"][changed[0]])
            if va and vb and va[0] == vb[0] and len(va[1]) == len(vb[1]):
                moved = [i for i in range(len(va[1])) if va[1][i] != vb[1][i]]
                if len(moved) == 1:
                    step = (changed[0], moved[0], round(vb[1][moved[0]] - va[1][moved[0]], 9))
        run = run + 1 if step is not None and step == last else (2 if step else 1)
        last, best = step, max(best, run)
    return best


def test_no_gold_call_list_is_cut_by_the_list_guard() -> None:
    lists = _bfcl_lists() + _academic_lists()
    assert len(lists) > 6000
    cut, longest = [], 0
    for key, calls in lists:
        ordered = sorted(calls, key=lambda c: (c["name"], _natural(c)))
        for order in (calls, ordered, ordered[::-1]):
            longest = max(longest, _longest_counting_run(order))
            guard = LoopGuard()
            guard.feed(json.dumps(order, ensure_ascii=False).encode()[:-1])  # the list before its "]"
            if guard.list_looping:
                cut.append(key)
    assert cut == []
    assert longest == LoopGuard.MAX_COUNTING_CALLS - 1  # four: radii 5, 10, 15, 20 (parallel_65, parallel_70)
