"""The default schema budgets refuse no real tool: every BFCL v4 tool set (single-turn entries and all
multi-turn function docs together) converts and gets its grammar, with a wide margin under each limit."""

from __future__ import annotations

import json
from typing import Any

from installed import require

from hammer_plugins import Tool
from hammer_plugins.grammar.builder import build_grammar
from hammer_plugins.tools.limits import SchemaLimits, fresh_budget
from hammer_plugins.values.errors import SchemaConversionError, SchemaLimitError

bfcl = require("hammer_evals.bfcl.bfcl", "hammer-evals")


def tool_sets() -> list[tuple[str, list[dict[str, Any]]]]:
    out = []
    for path in sorted(bfcl.data_dir().glob("BFCL_v4_*.json")):
        lines = path.read_text(encoding="utf-8").splitlines()
        if not lines or not lines[0].startswith('{"id"'):
            continue
        out += [(row["id"], row["function"]) for row in map(json.loads, lines) if row.get("function")]
    docs = [json.loads(line) for p in sorted((bfcl.data_dir() / "multi_turn_func_doc").glob("*.json"))
            for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [*out, ("all multi-turn function docs", docs)]


def test_no_bfcl_tool_set_is_over_a_default_limit() -> None:
    limits = SchemaLimits()
    sets = tool_sets()
    assert len(sets) > 3000
    peak = {"nodes": 0, "bytes": 0, "enum_bytes": 0, "grammar": 0}
    for _, functions in sets:
        tools: list[Tool] = []
        with fresh_budget() as budget:
            for function in functions:
                try:
                    tool = Tool.from_openai(bfcl.to_tool_spec(function))
                except SchemaLimitError:
                    raise
                except SchemaConversionError:
                    continue  # a construct the engine cannot render (Java's HashMap, ...): not a budget
                if tool.name not in {t.name for t in tools}:
                    tools.append(tool)
        peak = {**peak, "nodes": max(peak["nodes"], budget.nodes), "bytes": max(peak["bytes"], budget.bytes),
                "enum_bytes": max(peak["enum_bytes"], budget.enum_bytes)}
        if len(tools) > 40:  # the large sets: their grammars too
            grammar = build_grammar(tools, "auto")
            peak["grammar"] = max(peak["grammar"], len(grammar.gbnf) + len(grammar.lark))
    # Measured: 402 schema objects, 29 k characters, 745 enum characters, 105 k grammar characters.
    assert peak["nodes"] * 10 < limits.max_schema_nodes
    assert peak["bytes"] * 10 < limits.max_schema_bytes
    assert peak["enum_bytes"] * 10 < limits.max_enum_bytes
    assert 0 < peak["grammar"] * 10 < limits.max_grammar_bytes
