"""Tag parsing, accuracy summaries, name rewriting and the report, on tiny fixtures."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from hammer_evals.bfcl.accuracy import excluded_defects, summarize
from hammer_evals.bfcl.bfcl import BfclEntry, score
from hammer_evals.bfcl.report import write_report
from hammer_evals.bfcl.robustness import misleading_names, name_pools, random_names, variants_of
from hammer_evals.bfcl.runners import parse_tool_call_tags


def _entry() -> BfclEntry:
    return BfclEntry(id="t_0", category="simple_python", question=[{"role": "user", "content": "area of 10 by 5"}],
                     functions=[{"name": "geo.area", "description": "Area.", "parameters": {
                         "type": "dict", "properties": {"base": {"type": "integer"}, "height": {"type": "integer"}},
                         "required": ["base", "height"]}}],
                     ground_truth=[{"geo.area": {"base": [10], "height": [5]}}])


def test_tool_call_tags() -> None:
    text = ('ok <tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>'
            '<tool_call>{"name": "b", "arguments": "{}"}</tool_call>')
    assert parse_tool_call_tags(text) == ([("a", {"x": 1}), ("b", {})], False)
    assert parse_tool_call_tags("<tool_call>{oops</tool_call>") == ([], True)
    assert parse_tool_call_tags("```json\n{\"name\": \"a\"}\n```") == ([], False)


def test_summary() -> None:
    records = [
        {"runner": "r", "category": "simple_python", "correct": True, "malformed": False, "latency_s": 1.0},
        {"runner": "r", "category": "multiple", "correct": False, "malformed": True, "latency_s": 3.0},
        {"runner": "r", "category": "irrelevance", "correct": True, "malformed": False, "latency_s": 2.0},
    ]
    s = summarize(records)["r"]
    assert s["overall_ast"] == 0.5 and s["irrelevance"] == 1.0 and s["median_latency_s"] == 2.0
    assert abs(s["malformed_share"] - 1 / 3) < 1e-9
    assert set(excluded_defects(["parallel_multiple", "live_simple"])) == {
        "parallel_multiple_26", "live_simple_106-63-0", "live_simple_112-68-0"}


def test_random_names_rename_answers_consistently() -> None:
    renamed = random_names(_entry(), random.Random(3))
    name = renamed.functions[0]["name"]
    params = list(renamed.functions[0]["parameters"]["properties"])
    assert name != "geo.area" and 5 <= len(name) <= 15 and all(4 <= len(p) <= 10 for p in params)
    assert renamed.functions[0]["parameters"]["required"] == params
    assert score(renamed, [{name: {params[0]: 10, params[1]: 5}}]).correct
    assert not score(renamed, [{"geo.area": {"base": 10, "height": 5}}]).correct


def test_misleading_names_swap_parameters() -> None:
    pool_functions, pool_params = ["math.factorial", "send_email"], ["city", "to"]
    renamed = misleading_names(_entry(), random.Random(0), pool_functions, pool_params)
    name = renamed.functions[0]["name"]
    assert name in pool_functions
    assert list(renamed.functions[0]["parameters"]["properties"]) == ["height", "base"]
    # the value for the real "base" now goes to the parameter called "height"
    assert score(renamed, [{name: {"height": 10, "base": 5}}]).correct
    assert name_pools([_entry()]) == (["geo.area"], ["base", "height"])
    assert set(variants_of([_entry()], [_entry(), renamed])) == {"original", "random", "misleading"}


def test_report_from_partial_records(tmp_path: Path) -> None:
    (tmp_path / "accuracy_run.json").write_text(json.dumps({"model": "M", "command": "hammer bench accuracy"}))
    rows = [{"runner": "ChatHammer (constrained on, masking off)", "category": c, "correct": ok, "malformed": False,
             "latency_s": 1.0, "id": f"{c}_0"} for c, ok in (("simple_python", True), ("irrelevance", False))]
    (tmp_path / "accuracy_records.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    (tmp_path / "robustness.json").write_text(json.dumps({"summary": {
        m: {v: {"correct": 1, "n": 2, "accuracy": 0.5} for v in ("original", "random", "misleading")}
        for m in ("masking off", "masking on")}}))
    (tmp_path / "speed.json").write_text(json.dumps({"n_tools": 20, "repeats": 1, "load_s": 0.5, "peak_rss_mib": 300,
        "median": {"cold_ttft_s": 2.0, "warm_ttft_s": 0.2, "ttft_speedup": 10.0, "cold_total_s": 3.0, "warm_total_s": 1.0,
                   "cold_prompt_tokens": 2000, "warm_prompt_tokens": 2050, "warm_cached_prompt_tokens": 2000,
                   "overhead_s": 0.01, "overhead_share": 0.005}, "isolated_overhead_s": {"parse_s": 1e-5}}))
    text = write_report(tmp_path).read_text()
    assert "Partial" in text and "| 1/1 | 0/1 | 100.0% | 0.0% |" in text and "10.0x" in text and "0.500%" in text
    assert {p.name for p in tmp_path.glob("*.png")} == {"accuracy.png", "latency.png", "robustness.png", "speed.png"}


def test_bench_package_does_not_import_langchain() -> None:
    code = ("import pkgutil, importlib, sys, hammer_evals.bfcl as b\n"
            "[importlib.import_module(m.name) for m in pkgutil.walk_packages(b.__path__, 'hammer_evals.bfcl.')]\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('langchain', 'langchain_core', 'llama_index')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "[]", result.stderr[-1000:]


def test_cli_parser() -> None:
    import argparse

    from hammer_evals.bfcl.cli import add_bench_parser

    parser = argparse.ArgumentParser(prog="hammer")
    add_bench_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", "accuracy", "--sample", "all", "--runners", "hammer,chatllamacpp"])
    assert args.sample is None and args.runners == "hammer,chatllamacpp" and callable(args.func)


@pytest.mark.parametrize(("step", "runs"), [("accuracy", "CATEGORIES"), ("all", "CATEGORIES"),
                                            ("robustness", "ROBUSTNESS_CATEGORIES"),
                                            ("multi-turn", "MULTI_TURN_CATEGORIES")])
def test_each_steps_help_names_the_categories_it_runs(step: str, runs: str) -> None:
    """``--categories``' help gives the step's own default (multi-turn's said the single-turn list)."""
    import argparse

    import hammer_evals.bfcl as bfcl
    from hammer_evals.bfcl.cli import add_bench_parser
    from hammer_evals.bfcl.multi_turn import CATEGORIES as MULTI_TURN

    parser = argparse.ArgumentParser(prog="hammer")
    add_bench_parser(parser.add_subparsers(dest="command", required=True))
    steps = next(a for a in parser._subparsers._group_actions[0].choices["bench"]._actions  # type: ignore[union-attr]
                 if isinstance(a, argparse._SubParsersAction))
    categories = next(a for a in steps.choices[step]._actions if "--categories" in a.option_strings)
    assert categories.help == f"comma-separated; default: {','.join(getattr(bfcl, runs))}"
    assert bfcl.MULTI_TURN_CATEGORIES == MULTI_TURN  # the package's list is the one the multi-turn run reads
