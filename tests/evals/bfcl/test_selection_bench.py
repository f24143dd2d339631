"""benchmarks/tool_selection.py's own logic: a variant of several settings, and a fresh sample that avoids earlier ones.

No model: the variants are parsed and the questions drawn, as the script does before it loads one.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("tool_selection_bench", ROOT / "benchmarks" / "tool_selection.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return module


def test_a_variant_sets_several_settings_and_old_single_ones_still_parse(bench):
    label, settings = bench.parse_variant("tool_budget=1536,BEST_OF_QUESTION=8,MIN_SHARE_OF_BEST=0.5")
    assert settings == {"tool_budget": 1536, "BEST_OF_QUESTION": 8, "MIN_SHARE_OF_BEST": 0.5}
    assert label == "tool_budget=1536,BEST_OF_QUESTION=8,MIN_SHARE_OF_BEST=0.5"
    assert bench.parse_variant("MIN_SHARE_OF_BEST=0.7")[1] == {"MIN_SHARE_OF_BEST": 0.7}
    assert bench.parse_variant("tool_selector=bm25")[1] == {"tool_selector": "bm25"}
    assert bench.parse_variant("default") == ("default", {})


@pytest.mark.parametrize("text, says", [("MAX_OFFERED_TOOLS=1", "MAX_OFFERED_TOOLS"),
                                        ("tool_budget=1024,tool_budget=2048", "tool_budget=2048"),
                                        ("BEST_OF_QUESTION=eight", "needs a number"), ("tool_budget", "NAME=VALUE")])
def test_a_bad_variant_is_an_error_naming_it(bench, text, says):
    with pytest.raises(ValueError, match=says):
        bench.parse_variant(text)


def test_the_three_numbers_of_a_rule_are_the_meaning_selectors_constants(bench):
    from hammer_plugins.tools import meaning

    for name in ("BEST_OF_QUESTION", "MIN_SHARE_OF_BEST", "BEST_OF_PART"):
        assert name in bench.SETTABLE and isinstance(getattr(meaning, name), (int, float))


def test_a_fresh_sample_shares_no_question_with_the_avoided_ones(bench):
    earlier = {e.id for e in bench.questions(24, 24, 24, seed=1)}
    fresh = bench.questions(12, 6, 12, seed=58, avoid=((1, 24),))
    assert [e.category for e in fresh].count("parallel_multiple") == 12 and len(fresh) == 30
    assert not {e.id for e in fresh} & earlier
    assert [e.id for e in bench.questions(12, 6, 8)] == [e.id for e in bench.questions(12, 6, 8, seed=1)]
