"""Sample first, check after (issue 33) gives the full mask's answers, on 50 BFCL questions and the real model.

The llama.cpp backend's greedy loop now takes the unconstrained argmax and asks the grammar about
that one token, computing the whole mask only when it is refused; the old loop computed the mask at
every step. Both pick the masked argmax, so the answers must be equal token for token. They are
compared by the rule of ``test_fast_forward.py`` (:func:`near_tie_verdict`): equal, or at the first
differing token both tokens are grammar-allowed and one-token-at-a-time logits put them under 0.5
apart (batch composition, hence logits, could differ where the two loops decide differently whether
a token is forced). The questions are BFCL's own (simple, multiple, parallel, parallel multiple,
irrelevance: string and number arguments, several calls, refusals), drawn with a fixed seed.

Both loops run on one backend, question by question, so the second reuses the first's prompt from
the KV cache: the cost is one prompt evaluation per question and two decodes.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_fast_forward import Recorder, Verdict, near_tie_verdict

from hammer_plugins import HammerEngine
from hammer_plugins.backends.llama_cpp import LlamaCppBackend

pytestmark = pytest.mark.real_model

# (category, how many): 50 questions, the floor (each costs about 9 s of CI time); answers of the
# small model run up to about 100 tokens.
SAMPLE = (("simple_python", 12), ("multiple", 12), ("parallel", 9), ("parallel_multiple", 9), ("irrelevance", 8))
MAX_TOKENS = 160


def _questions() -> list[tuple[str, list[dict[str, Any]], list[dict[str, Any]]]]:
    bfcl = pytest.importorskip("hammer_evals.bfcl.bfcl", reason="hammer-evals (in the dev install) holds BFCL's loader")
    out = []
    for category, n in SAMPLE:
        entries, _ = bfcl.load_category(category, sample=n, seed=33)
        out.extend((e.id, list(e.question), [bfcl.to_tool_spec(f) for f in e.functions]) for e in entries)
    return out


@pytest.fixture(scope="module")
def runs(default_model_path: str) -> dict[str, Any]:
    backend = LlamaCppBackend(default_model_path, n_ctx=4096)
    engine = HammerEngine(backend=backend, max_tokens=MAX_TOKENS)
    recorder = Recorder(backend)
    backend._hammer_test_recorder = recorder  # type: ignore[attr-defined]
    masks: dict[bool, list[int]] = {True: [], False: []}
    make_mask = recorder.make_mask

    def counting_mask(grammar: Any, loop_guard: bool) -> Any:  # counts full masks, to see the fast path is taken
        mask = make_mask(grammar, loop_guard)
        allowed = mask.allowed

        def counted(n_vocab: int) -> Any:
            masks[backend._full_mask_decoding][-1] += 1
            return allowed(n_vocab)

        mask.allowed = counted
        return mask

    recorder.make_mask = counting_mask
    out: dict[str, Any] = {"ids": [], "verdicts": [], "raw": {True: [], False: []}, "tokens": 0, "masks": masks}
    for qid, messages, tools in _questions():
        calls = {}
        for full in (True, False):  # the old loop first: the new one then reuses the prompt's KV state
            backend._full_mask_decoding = full
            masks[full].append(0)
            before = len(recorder.calls)
            reply = engine.generate(messages, tools=tools)
            calls[full] = recorder.calls[before:]
            out["raw"][full].append(reply.raw)
            if full:
                out["tokens"] += reply.usage.completion_tokens
        backend._full_mask_decoding = False
        out["ids"].append(qid)
        out["verdicts"].append(near_tie_verdict(calls[True], calls[False], backend))
    return out


def test_sample_first_gives_the_full_mask_answers(runs: dict[str, Any]) -> None:
    verdicts: list[Verdict] = runs["verdicts"]
    assert len(verdicts) >= 50
    bad = [f"{qid}: {v.message}" for qid, v in zip(runs["ids"], verdicts, strict=True) if not v.ok]
    assert not bad, bad
    ties = [f"{qid}: {v.message}" for qid, v in zip(runs["ids"], verdicts, strict=True) if not v.equal]
    print(f"{len(verdicts) - len(ties)} identical, {len(ties)} near ties", *ties, sep="\n")
    for verdict, old, new in zip(verdicts, runs["raw"][True], runs["raw"][False], strict=True):
        if verdict.equal:
            assert new == old


def test_the_full_mask_is_computed_only_where_needed(runs: dict[str, Any]) -> None:
    """The new loop is really taken: the old one computes the mask at every step, the new one at far fewer."""
    old, new = sum(runs["masks"][True]), sum(runs["masks"][False])
    assert old >= runs["tokens"] - len(runs["ids"])  # one per chosen token (the forced ones included)
    assert new < old / 2, (new, old)
