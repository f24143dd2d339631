"""Gold answers and the cases issue 24 reported: accepted by the grammar through the engine's token mask
(loop guard included), over the real Qwen2.5 vocabulary.

The Hammer paper's academic sets (shipped at ``hammer_evals/datasets/academic``): every gold answer
that is well-typed (calls only offered tools, arguments valid against the converted schema with
objects closed, keys in declaration order, which the grammar pins) must be written through the mask
as ``json.dumps`` writes it, with ``ensure_ascii`` either way: 799 of 799, Tool-Alpaca's five calls
of ``api_v2_facts_random_get`` included (the list guard closed the list after the third before).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from grammar_oracles import lark_accepts, mask_accepts
from installed import require
from shared_data import academic_dir

from hammer_plugins import Tool
from hammer_plugins.grammar.builder import build_grammar
from hammer_plugins.grammar.loop_guard import LoopGuard
from hammer_plugins.tools.definition import to_tools
from hammer_plugins.tools.json_schema import to_json_schema

academic = require("hammer_evals.academic", "hammer-evals")

WELL_TYPED = {"apibank_l1": 347, "apibank_l2": 110, "toolalpaca": 103, "sealtool": 239}  # 799 in all


def closed(schema: Any) -> Any:
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed(v) if k in ("items", "anyOf", "oneOf") else v for k, v in schema.items()}
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {k: closed(v) for k, v in schema["properties"].items()}
        out["additionalProperties"] = False
    return out


def well_typed(gold: list[dict[str, Any]], tools: list[Tool]) -> bool:
    by_name = {t.name: t for t in tools}
    if not gold or any(call["name"] not in by_name for call in gold):
        return False
    for call in gold:
        tool = by_name[call["name"]]
        if not jsonschema.Draft202012Validator(closed(to_json_schema(tool.parameters))).is_valid(call["arguments"]):
            return False
        if list(call["arguments"]) != [name for name in tool.properties if name in call["arguments"]]:
            return False
    return True


def test_every_well_typed_academic_gold_answer_is_accepted(qwen_lltokenizer: Any) -> None:
    counts: dict[str, int] = {}
    refused: list[str] = []
    for name in academic.SETS:
        counts[name] = 0
        for entry in academic.load_set(academic_dir(), name):
            tools = to_tools(entry.tools)
            if not well_typed(entry.gold, tools):
                continue
            counts[name] += 1
            grammar = build_grammar(tools)
            for ascii_only in (False, True):
                if not mask_accepts(qwen_lltokenizer, grammar, json.dumps(entry.gold, ensure_ascii=ascii_only)):
                    refused.append(f"{entry.key} ensure_ascii={ascii_only}")
    assert counts == WELL_TYPED
    assert refused == []


FACTS = Tool(name="api_v2_facts_random_get", parameters={"type": "object", "properties": {}})
DIE = Tool(name="roll", parameters={"type": "object", "properties": {"sides": {"type": "integer"}}, "required": ["sides"]})


def calls(tool: str, n: int, arguments: dict[str, Any] | None = None) -> str:
    return json.dumps([{"name": tool, "arguments": arguments or {}}] * n)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_identical_argument_free_calls_are_accepted_up_to_eight(qwen_lltokenizer: Any, n: int) -> None:
    """Tool-Alpaca's gold answer for "give me 5 random facts" is five identical argument-free calls."""
    assert mask_accepts(qwen_lltokenizer, build_grammar([FACTS, DIE]), calls(FACTS.name, n))


def test_a_runaway_list_of_identical_calls_is_still_closed(qwen_lltokenizer: Any) -> None:
    grammar = build_grammar([FACTS, DIE])
    assert not mask_accepts(qwen_lltokenizer, grammar, calls(FACTS.name, 9))  # closed after the eighth
    assert mask_accepts(qwen_lltokenizer, grammar, calls(DIE.name, 3, {"sides": 6}))
    assert not mask_accepts(qwen_lltokenizer, grammar, calls(DIE.name, 4, {"sides": 6}))  # closed after the third
    alternating = json.dumps([{"name": DIE.name, "arguments": {"sides": s}} for s in (6, 8, 6, 8)])
    assert not mask_accepts(qwen_lltokenizer, grammar, alternating)  # an earlier, non-adjacent call repeated
    assert lark_accepts(qwen_lltokenizer, grammar, calls(FACTS.name, 9))  # the grammar alone: the guard does it


def test_the_list_guard_rule_with_argument_free_calls() -> None:
    """Oracle over lists of calls ``f()`` and ``g(n)``: the list loops from the first call that repeats an
    earlier non-adjacent call, or that makes a run of identical calls 8 long (argument-free) or 3 long."""
    import random

    rng = random.Random(0)
    for _ in range(300):
        values = [rng.choice([None, None, None, 1, 2]) for _ in range(rng.randint(1, 14))]
        guard = LoopGuard()
        guard.feed(b"[")
        for i, value in enumerate(values):
            call = b'{"name": "f", "arguments": {}}' if value is None else b'{"name": "g", "arguments": {"n": %d}}' % value
            guard.feed((b", " if i else b"") + call)
            expected = False
            for j in range(i + 1):
                run = 1
                while run <= j and values[j - run] == values[j]:
                    run += 1
                limit = 8 if values[j] is None else 3
                expected = expected or values[j] in values[:j - run + 1] or run >= limit
            assert guard.list_looping == expected, values[:i + 1]


ISSUE = Tool(name="get_user", parameters={"type": "object", "properties": {
    "user_id": {"type": "integer"}, "score": {"type": "number"},
    "city": {"type": "string", "enum": ["Zürich", "Genève", "東京", "😀 club", 'say "hi"/\\']},
    "metrics": {"type": "array", "items": {"type": "string"}, "enum": ["view", "buzz", "trust"]}}, "required": []})


@pytest.mark.parametrize("arguments", [
    {"user_id": 1306652829778868500}, {"user_id": -(10**40)}, {"score": 1e-300}, {"score": 10**25},
    {"score": 123456789012345678901234.5678901234567890123},
    *({"city": c} for c in ISSUE.parameters["properties"]["city"]["enum"]),
    {"metrics": ["view"]}, {"metrics": ["trust", "buzz"]}, {"metrics": []},
])
@pytest.mark.parametrize("ascii_only", [False, True])
def test_the_reported_rejections_are_accepted(qwen_lltokenizer: Any, arguments: dict[str, Any], ascii_only: bool) -> None:
    text = json.dumps([{"name": "get_user", "arguments": arguments}], ensure_ascii=ascii_only)
    assert mask_accepts(qwen_lltokenizer, build_grammar([ISSUE]), text)


@pytest.mark.parametrize("city", ["Z\\u00FCrich", "\\u005a\\u00fcrich", "\\ud83d\\ude00 club", "\\uD83D\\uDE00\\u0020club",
                                  'say \\u0022hi\\"\\/\\\\', 'say \\"hi\\"/\\u005C'])
def test_enum_values_take_every_json_spelling(qwen_lltokenizer: Any, city: str) -> None:
    text = '[{"name": "get_user", "arguments": {"city": "' + city + '"}}]'
    assert json.loads(text)[0]["arguments"]["city"] in ISSUE.parameters["properties"]["city"]["enum"]
    assert lark_accepts(qwen_lltokenizer, build_grammar([ISSUE]), text)


@pytest.mark.parametrize("arguments", [
    '{"city": "Zurich"}', '{"city": "Z\\u00fcrich "}', '{"city": "\\ud83d\\ude01 club"}', '{"user_id": 1.5}',
    '{"user_id": "1306652829778868500"}', '{"metrics": ["views"]}', '{"metrics": "view"}', '{"userid": 1}',
])
def test_what_the_schema_forbids_is_still_refused(qwen_lltokenizer: Any, arguments: str) -> None:
    text = '[{"name": "get_user", "arguments": ' + arguments + "}]"
    assert not lark_accepts(qwen_lltokenizer, build_grammar([ISSUE]), text)


def test_names_in_either_spelling(qwen_lltokenizer: Any) -> None:
    tool = Tool(name="météo", parameters={"type": "object", "properties": {"ville/nom": {"type": "string"}},
                                          "required": ["ville/nom"]})
    grammar = build_grammar([tool], "required")
    call = [{"name": "météo", "arguments": {"ville/nom": "Paris"}}]
    for ascii_only in (False, True):
        assert lark_accepts(qwen_lltokenizer, grammar, json.dumps(call, ensure_ascii=ascii_only))
    assert lark_accepts(qwen_lltokenizer, grammar, '[{"name": "m\\u00E9t\\u00e9o", "arguments": {"ville\\/nom": "P"}}]')
    assert not lark_accepts(qwen_lltokenizer, grammar, '[{"name": "meteo", "arguments": {"ville/nom": "P"}}]')
