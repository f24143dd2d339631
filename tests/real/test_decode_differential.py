"""Sample first, check after picks what the full mask picks, at every step, on eight BFCL questions.

The llama.cpp backend's greedy loop now takes the unconstrained argmax and asks the grammar about that one
token, computing the whole mask only when it is refused; the old loop computed the mask at every step. Both
pick the masked argmax, so at every step of one decode by the new loop, the old loop's pick on the same
logits (tests/decode_steps.py: a grammar mask of its own, fed the same tokens) must be the same token:
exact, no near-tie margin. The questions are BFCL's own, stratified (simple, multiple, parallel,
parallel multiple, irrelevance: string and number arguments, several calls, refusals), drawn with a fixed
seed. The fifty-question version, two whole decodes compared: benchmarks/decode_differential.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from decode_steps import StepCheck, bfcl_questions
from installed import require

from hammer_plugins import HammerEngine
from hammer_plugins.backends.llama_cpp import LlamaCppBackend

# Longer than the suite's 300 s: the first test decodes eight BFCL answers in its setup (a dozen took over 900 s at
# load 15 on 2 cores).
pytestmark = [pytest.mark.real_model, pytest.mark.timeout(1800)]

# (category, how many): eight, every category of single-turn BFCL the engine answers differently.
SAMPLE = (("simple_python", 2), ("multiple", 2), ("parallel", 2), ("parallel_multiple", 1), ("irrelevance", 1))
MAX_TOKENS = 160


@pytest.fixture(scope="module")
def runs(default_model_path: str) -> dict[str, Any]:
    require("hammer_evals.bfcl.bfcl", "hammer-evals")  # BFCL's questions: fails, never skips
    backend = LlamaCppBackend(default_model_path, n_ctx=4096)
    engine = HammerEngine(backend=backend, max_tokens=MAX_TOKENS)
    check = StepCheck(backend)
    out: dict[str, Any] = {"ids": [], "calls": [], "tokens": 0}
    with check.watching() as steps:
        for qid, messages, tools in bfcl_questions(SAMPLE):
            calls = check.calls
            reply = engine.generate(messages, tools=tools)
            out["calls"].append(check.calls - calls)
            if reply.finish_reason != "length":
                check.check_end(frozenset(backend.vocabulary.tokenizer.eos_tokens))
            out["ids"].append(qid)
            out["tokens"] += reply.usage.completion_tokens
    out["steps"] = steps
    return out


def test_at_every_step_the_new_loop_picks_the_full_masks_token(runs: dict[str, Any]) -> None:
    steps = runs["steps"]
    assert len(runs["ids"]) == 8 and runs["calls"] == [1] * 8, runs["calls"]  # one decode each: every step seen
    assert steps.differences == []
    assert steps.picks >= runs["tokens"] - len(runs["ids"])  # every token (the end, unless the grammar ended it)
    assert steps.free > 0 and steps.forced > 0  # picks read from the logits, and tokens the grammar forced
    print(f"\n{steps.picks} steps on {len(runs['ids'])} questions: {steps.free} from the logits, {steps.forced} forced; "
          f"{steps.full_masks} full masks computed by the new loop")


def test_the_full_mask_is_computed_only_where_needed(runs: dict[str, Any]) -> None:
    """The new loop is really taken: the old one computes the mask at every step, the new one at far fewer."""
    steps = runs["steps"]
    assert steps.full_masks < steps.picks / 2, (steps.full_masks, steps.picks)
