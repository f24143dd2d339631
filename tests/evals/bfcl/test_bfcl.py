"""Loading, conversion and scoring with bfcl-eval's real checker (no model)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hammer_evals.bfcl import CATEGORIES
from hammer_evals.bfcl.bfcl import (
    ANSWER_KEY_DEFECTS,
    BfclEntry,
    load_category,
    score,
    to_bfcl_output,
    to_openai_tool,
    to_tool_spec,
)


def _entry(category: str = "simple_python") -> BfclEntry:
    return BfclEntry(id="t_0", category=category, question=[{"role": "user", "content": "area of 10 by 5"}],
                     functions=[{"name": "geo.area", "description": "Area.", "parameters": {
                         "type": "dict", "properties": {"base": {"type": "integer"}, "height": {"type": "float"},
                                                        "unit": {"type": "string"}}, "required": ["base", "height"]}}],
                     ground_truth=[{"geo.area": {"base": [10], "height": [5.0], "unit": ["", "units"]}}])


def test_types_become_json_schema_for_other_runtimes() -> None:
    schema = {"type": "dict", "properties": {
        "a": {"type": "float"}, "b": {"type": "tuple", "items": {"type": "integer"}}, "c": {"type": "any"},
        "d": {"type": "array", "items": {"type": "dict", "properties": {"x": {"type": "float"}}}}}}
    parameters = to_openai_tool({"name": "f", "parameters": schema})["function"]["parameters"]
    assert parameters == {"type": "object", "properties": {
        "a": {"type": "number"}, "b": {"type": "array", "items": {"type": "integer"}}, "c": {},
        "d": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "number"}}}}}}


def test_tool_spec_keeps_dotted_name_and_our_engine_accepts_it() -> None:
    from hammer_plugins.grammar.builder import build_grammar
    from hammer_plugins.tools.definition import to_tool

    spec = to_tool_spec(_entry().functions[0])
    assert spec["name"] == "geo.area" and spec["parameters"]["type"] == "dict"  # as BFCL writes it
    tool = to_tool(spec)
    assert tool.name == "geo.area"
    assert "geo.area" in build_grammar([tool], "auto", True).gbnf


def test_score_uses_the_ast_checker() -> None:
    entry = _entry()
    assert score(entry, to_bfcl_output([("geo.area", {"base": 10, "height": 5})])).correct
    assert score(entry, [{"geo.area": {"base": 10, "height": 5.0, "unit": "units"}}]).correct
    wrong = score(entry, [{"geo.area": {"base": 11, "height": 5}}])
    assert not wrong.correct and "base" in wrong.error
    assert not score(entry, []).correct
    assert not score(entry, [{"geo.volume": {"base": 10, "height": 5}}]).correct


def test_relevance_rule() -> None:
    assert score(_entry("irrelevance"), []).correct
    assert not score(_entry("irrelevance"), [{"geo.area": {}}]).correct
    assert score(_entry("live_relevance"), [{"geo.area": {}}]).correct
    assert not score(_entry("live_relevance"), []).correct


def test_checker_import_is_light() -> None:
    # In a fresh interpreter: other test modules import openai at collection time.
    code = ("import sys\nfrom hammer_evals.bfcl.bfcl import load_checker\nload_checker()\n"
            "print([m for m in ('openai', 'anthropic', 'torch', 'google.genai') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("category", CATEGORIES)
def test_every_category_loads_and_defects_are_excluded(category: str) -> None:
    entries, excluded = load_category(category)
    assert entries and (category == "live_irrelevance" or all(e.functions for e in entries))
    assert not {e.id for e in entries} & set(ANSWER_KEY_DEFECTS)
    assert set(excluded) <= set(ANSWER_KEY_DEFECTS)
    if not entries[0].is_relevance_test:
        assert all(e.ground_truth for e in entries)


def test_sampling_is_seeded_and_sized() -> None:
    a, _ = load_category("multiple", sample=5, seed=1)
    b, _ = load_category("multiple", sample=5, seed=1)
    assert [e.id for e in a] == [e.id for e in b] and len(a) == 5


def test_ground_truth_passes_for_a_slice() -> None:
    entries, _ = load_category("simple_python")
    for entry in entries[:40]:
        truth = [{name: {k: v[0] for k, v in args.items() if v[0] != ""}} for item in entry.ground_truth
                 for name, args in item.items()]
        if any(isinstance(v, dict) for item in truth for args in item.values() for v in args.values()):
            continue
        verdict = score(entry, truth)
        assert verdict.correct or "Expected one of" in verdict.error, (entry.id, verdict.error)


def test_each_bench_step_lists_only_the_options_it_reads() -> None:
    """`hammer bench robustness/speed/report` listed --base-url, --concurrency and --runners and ignored them:
    every option a step lists is read by its command (``all``: by one of the steps it runs)."""
    import argparse
    import inspect

    from hammer_evals.bfcl import cli

    parser = argparse.ArgumentParser()
    cli.add_bench_parser(parser.add_subparsers(dest="command"))
    bench = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["bench"]
    steps = next(a for a in bench._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, step in steps.items():
        command = step.get_default("func")
        functions = [cli.cmd_accuracy, cli.cmd_robustness, cli.cmd_speed, cli.cmd_report] if name == "all" else [command]
        source = "".join(inspect.getsource(f) for f in functions)
        listed = {a.dest for a in step._actions if a.dest != "help"}
        unread = sorted(d for d in listed if f"args.{d}" not in source)
        assert unread == [], (name, unread)
    assert {a.dest for a in steps["report"]._actions} == {"help", "out"}
