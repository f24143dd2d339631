"""``hammer bench`` runs users start, on the embedded default model (the stand-in): the speed step, the peer
runners side by side with ChatHammer, and a multi-turn entry through the agent loop, each to its written
results. The failure paths (no llama-cpp-python) are test_model_unavailable.py's; the docs' figures come from
full runs (docs/benchmarks.md).

The stand-in is no Hammer model, so these assert what a run must produce whatever the answers: every
question asked and answered, results written and scored by bfcl-eval's checker, cold against warm measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.real_model


def _bench(*args: str, out: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "hammer_plugins.cli", "bench", *args, "--model", "default",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_bench_speed_measures_cold_and_warm_turns(tmp_path: Path) -> None:
    _bench("speed", "--repeats", "1", "--tools", "3", "--max-tokens", "48", out=tmp_path)
    speed = json.loads((tmp_path / "speed.json").read_text())
    median = speed["median"]
    assert speed["n_tools"] == 3 and speed["repeats"] == 1
    assert [run["turn"] for run in speed["runs"]] == ["cold", "warm"]
    # Warm reuses the tools prefix the cold turn left in the KV cache: fewer tokens evaluated, an earlier first token.
    assert median["warm_cached_prompt_tokens"] > speed["runs"][0]["cached_prompt_tokens"]
    assert median["warm_ttft_s"] < median["cold_ttft_s"] and median["ttft_speedup"] > 1
    assert 0 < median["overhead_share"] < 1 and speed["peak_rss_mib"] > 100
    assert set(speed["isolated_overhead_s"]) >= {"schema_conversion_s", "grammar_build_s", "grammar_compile_s"}


def test_bench_accuracy_runs_the_peer_runners_beside_chat_hammer(tmp_path: Path) -> None:
    """ChatLlamaCpp (chatml-function-calling) and llama-cpp-python's own tools path on the same questions as
    ChatHammer, as the README's side-by-side claims; then the report reads all three."""
    _bench("accuracy", "--sample", "1", "--categories", "simple_python", "--max-tokens", "96",
           "--runners", "hammer,chatllamacpp,llamacpp-tools", out=tmp_path)
    report_run = subprocess.run([sys.executable, "-m", "hammer_plugins.cli", "bench", "report", "--out", str(tmp_path)],
                                capture_output=True, text=True, timeout=300)
    assert report_run.returncode == 0, report_run.stderr[-3000:]
    summary = json.loads((tmp_path / "accuracy.json").read_text())["summary"]
    records = [json.loads(line) for line in (tmp_path / "accuracy_records.jsonl").read_text().splitlines()]
    assert len(summary) == 3 and {r["kind"] for r in records} == {"hammer", "chatllamacpp", "llamacpp-tools"}
    for runner, result in summary.items():
        mine = [r for r in records if r["runner"] == runner]
        assert result["n"] == len(mine) == 1, runner  # the question asked of each runner
        assert set(result["per_category"]) == {"simple_python"}
        assert all(r["latency_s"] > 0 and "error" in r for r in mine), mine  # answered, and scored by the checker
    report = (tmp_path / "summary.md").read_text()
    assert all(runner in report for runner in summary)


def test_bench_multi_turn_drives_an_entry_through_the_agent_loop(tmp_path: Path) -> None:
    """A TradingBot entry (two turns), its calls executed on bfcl-eval's simulator and judged by its checker."""
    _bench("multi-turn", "--categories", "multi_turn_base", "--skip", "100", "--sample", "1", "--max-steps", "2",
           "--max-tokens", "128", "--n-ctx", "8192", out=tmp_path)
    record = json.loads((tmp_path / "multi_turn_records.jsonl").read_text())
    assert record["id"] == "multi_turn_base_100" and len(record["steps"]) == 2
    made = [call for turn in record["steps"] for step in turn for call in step]
    assert made, "the model called nothing in two turns"
    from hammer_evals.bfcl.multi_turn import load_entries

    entry = next(e for e in load_entries("multi_turn_base") if e["id"] == "multi_turn_base_100")
    assert {call.split("(")[0] for call in made} <= {f["name"] for f in entry["function"]}  # run on TradingBot
    assert record["valid"] or record["error_type"].startswith("multi_turn:"), record  # bfcl-eval's checker judged it
    summary = json.loads((tmp_path / "multi_turn.json").read_text())["summary"]
    assert summary[record["runner"]]["multi_turn_base"] == {"correct": int(record["valid"]), "entries": 1}
