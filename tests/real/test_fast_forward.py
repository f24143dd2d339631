"""Fast-forwarded greedy decoding, with and without prompt-lookup drafts, on the real default model
gives plain greedy's answers (one token per step through llama-cpp-python's own loop) across tool
sets, forced choices, refusals, streaming and a max_tokens cut, except where plain greedy itself
faced a near tie.

The fast path takes the grammar's forced tokens without running the model and evaluates them later
in one batch (and verifies prompt-lookup drafts in a batch). A batch's logits differ from
one-token-at-a-time logits (llama.cpp's kernels for a batch are not those for one token: the
top-two margin moved by up to 0.42 logits here), so where the two best grammar-allowed tokens are
almost equal the fast path may pick the other one; which one depends on the CPU (issue 23: on one
machine the e-mail body of question 2 ended "3pm." instead of "3pm. Please check the meeting
details."). Bit-identical answers would need one model run per forced token, which is what the
fast path saves. So the tests check the property that does hold everywhere
(:func:`near_tie_verdict`): the answers are equal token for token, or at the first token where they
differ both tokens are grammar-allowed and plain greedy's own logits (one token at a time, after
the common prefix, under the grammar mask) put them less than :data:`EPSILON` apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from hammer_plugins import HammerEngine, Message
from hammer_plugins.backends.llama_cpp import LlamaCppBackend
from hammer_plugins.cli.main import load_tools_file

# Longer than the suite's 300 s: the first test decodes 27 answers (three backends) in its setup.
pytestmark = [pytest.mark.real_model, pytest.mark.timeout(1800)]

LOOP_TOKENS = 160
QUESTIONS: list[tuple[str, str, dict[str, Any]]] = [
    ("demo", "What's the weather in Paris?", {}),
    ("demo", "What is 23 * 47?", {}),
    ("demo", "Email bob@example.com that the meeting moved to 3pm.", {}),
    ("demo", "Weather in Rome and Oslo, in fahrenheit", {}),
    ("demo", "What time is it in UTC+2?", {"tool_choice": "get_current_time"}),
    ("demo", "Tell me a joke", {}),
    ("demo", "Email alice@example.com a long summary of the quarter", {"max_tokens": 24}),
    ("file", "Find flights from Paris to Tokyo on 2026-05-03 for two people", {}),
    # Capped: uncapped, this answer is a ~500-token degenerate loop of invented calls, decoded by all three
    # backends and replayed for ties (a third of this module's time); 160 tokens keep the loop and the drafts in it.
    ("file", "Convert 100 US dollars to euros", {"tool_choice": "required", "max_tokens": LOOP_TOKENS}),
]

DRAFTS = "drafts"

# Two grammar-allowed tokens whose logits (plain greedy's, one token at a time) are closer than this
# are a near tie: batched evaluation may pick either. Measured on this project's 2-core CPU with
# Qwen2.5-Coder-0.5B Q4 (plain answers to questions 2, 5, 7 and 8 re-evaluated in batches of 2 to
# 8 tokens against one token at a time, 611 steps with a choice): the top-two margin moved by a
# median 0.055 logits, 0.25 at the 99th percentile and 0.42 at most (the quantized kernels for
# a batch are not those for one token, so this is more than rounding). The fast path did flip two
# ties here: 0.156 (question 2) and 0.339 (question 8, before LOOP_TOKENS). Then, 24 of the 751 choices in
# plain greedy's answers to QUESTIONS had a margin below 0.5; every other one must come out the same.
EPSILON = 0.5


@dataclass
class Call:
    """One backend call, as recorded: what a check needs to replay plain greedy's steps."""

    prompt_tokens: list[int]
    grammar: Any
    loop_guard: bool
    sampled: list[int] = field(default_factory=list)   # picked by llama-cpp-python's loop (plain path)
    consumed: list[int] = field(default_factory=list)  # fed to the grammar mask (fast path)
    ends: frozenset[int] = frozenset()

    @property
    def tokens(self) -> list[int]:
        """The answer's tokens, without the end-of-generation token."""
        if self.sampled:  # the loop samples every token, the end included; the mask misses the last one
            out = list(self.sampled)
            while out and out[-1] in self.ends:
                out.pop()
            return out
        return list(self.consumed)


class Recorder:
    """Test-only hook: records every call of one backend (prompt tokens, grammar, answer tokens).

    It wraps three attributes of the backend instance: ``_stream`` (one :class:`Call` per call),
    ``_token_mask`` (the mask's ``consume``: every token the fast path takes) and, once the model
    is loaded, ``llama.sample`` (every token llama-cpp-python's own loop picks). Decoding itself is
    untouched.
    """

    def __init__(self, backend: LlamaCppBackend) -> None:
        self.backend = backend
        self.calls: list[Call] = []
        self.make_mask = backend.vocabulary.token_mask
        stream = backend._stream

        def recording_stream(prompt: str, settings: Any, grammar: Any) -> Any:
            self._hook_sampler()
            ends = frozenset(backend.vocabulary.tokenizer.eos_tokens) if backend.vocabulary.tokenizer is not None else frozenset()
            self.calls.append(Call(backend.tokenize(prompt), grammar, settings.loop_guard, ends=ends))
            yield from stream(prompt, settings, grammar)

        def recording_mask(grammar: Any, loop_guard: bool) -> Any:
            mask = self.make_mask(grammar, loop_guard)
            call, consume = self.calls[-1], mask.consume
            call.ends = frozenset(backend.vocabulary.tokenizer.eos_tokens)

            def recording_consume(tokens: Any) -> None:
                call.consumed.extend(int(t) for t in tokens)
                consume(tokens)

            mask.consume = recording_consume
            return mask

        backend._stream = recording_stream  # type: ignore[method-assign]
        backend.vocabulary.token_mask = recording_mask  # type: ignore[method-assign]

    def _hook_sampler(self) -> None:
        llama = self.backend.llama
        if "sample" in vars(llama):
            return
        sample = llama.sample

        def recording_sample(*args: Any, **kwargs: Any) -> int:
            token = sample(*args, **kwargs)
            self.calls[-1].sampled.append(int(token))
            return token

        llama.sample = recording_sample


@dataclass
class Verdict:
    """How a fast answer compares with plain greedy's (:func:`near_tie_verdict`)."""

    equal: bool
    ok: bool
    message: str = ""
    call: int = -1        # the first backend call whose tokens differ
    position: int = -1    # the first differing token in it
    margin: float = 0.0   # plain logit of plain's token minus that of the fast token


def fresh_mask(backend: LlamaCppBackend, call: Call) -> Any:
    """A new grammar mask for ``call``, as the backend builds it (not the recording one)."""
    recorder = getattr(backend, "_hammer_test_recorder", None)
    make = recorder.make_mask if recorder is not None else backend.vocabulary.token_mask
    return make(call.grammar, call.loop_guard)


def replayed_logits(backend: LlamaCppBackend, prompt_tokens: list[int], answer_prefix: list[int]) -> Any:
    """Plain greedy's logits after ``prompt_tokens + answer_prefix``, evaluated as llama-cpp-python's loop
    does (the prompt in batches, then one token at a time), with the plain backend's own ``Llama``."""
    llama = backend.llama
    llama.reset()
    llama.eval(prompt_tokens)
    for token in answer_prefix:
        llama.eval([token])
    return np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).copy()


def near_tie_verdict(plain: list[Call], fast: list[Call], plain_backend: LlamaCppBackend,
                     epsilon: float = EPSILON) -> Verdict:
    """Whether a fast answer is plain greedy's, or leaves it only at a near tie.

    ``plain`` and ``fast`` are the recorded backend calls of one question. The calls are compared
    in order; at the first one whose answer tokens differ (later calls depend on it and may differ
    freely), at the first differing token ``i``: plain greedy's logits after prompt + common prefix
    are recomputed one token at a time with the plain backend's ``Llama``, the grammar mask after
    the common prefix is read from the project's :class:`~hammer_plugins.grammar.token_mask.TokenMask`,
    and the verdict is ok only when the fast token is grammar-allowed there and
    ``|logit[plain token] - logit[fast token]| < epsilon``. A token missing because its answer
    ended is the best allowed end-of-generation token.
    """
    for n, (p, f) in enumerate(zip(plain, fast, strict=False)):
        if p.prompt_tokens != f.prompt_tokens:
            return Verdict(False, False, f"call {n}: the prompts differ though every earlier answer was equal", n)
        if p.tokens != f.tokens:
            return _judge_first_difference(n, p, f, plain_backend, epsilon)
    if len(plain) != len(fast):
        return Verdict(False, False, f"{len(plain)} backend calls in plain greedy, {len(fast)} fast, all equal")
    return Verdict(True, True, "equal")


def _judge_first_difference(n: int, p: Call, f: Call, plain_backend: LlamaCppBackend, epsilon: float) -> Verdict:
    pt, ft = p.tokens, f.tokens
    i = next((k for k, (a, b) in enumerate(zip(pt, ft, strict=False)) if a != b), min(len(pt), len(ft)))
    logits = replayed_logits(plain_backend, p.prompt_tokens, pt[:i])
    mask = fresh_mask(plain_backend, p)
    mask.consume(pt[:i])
    allowed = mask.allowed(logits.shape[0])
    masked = np.where(allowed, logits, -np.inf)
    ends = sorted(p.ends | f.ends)

    def pick(tokens: list[int]) -> int:
        if i < len(tokens):
            return tokens[i]
        return max((e for e in ends if allowed[e]), key=lambda e: masked[e], default=ends[0] if ends else -1)

    a, b = pick(pt), pick(ft)
    text = plain_backend.llama.detokenize
    where = (f"call {n}, token {i} (after {text(pt[:i])[-40:]!r}): plain greedy chose {a} "
             f"{text([a])!r}, the fast path {b} {text([b])!r}")
    if not allowed[b]:
        return Verdict(False, False, f"{where}; the fast token breaks the grammar", n, i, float("inf"))
    if not allowed[a]:
        return Verdict(False, False, f"{where}; plain greedy's token is not allowed on replay", n, i, float("inf"))
    margin = float(masked[a] - masked[b])
    best = int(np.argmax(masked))
    detail = f"{where}; plain logits {masked[a]:.4f} vs {masked[b]:.4f}, margin {margin:.4f} (epsilon {epsilon})"
    if masked[best] - masked[a] >= epsilon:  # the replay must agree that plain greedy's token was (about) the best
        return Verdict(False, False, f"{detail}; but the best allowed token on replay is {best} "
                       f"{text([best])!r} ({masked[best]:.4f})", n, i, margin)
    ok = abs(margin) < epsilon
    return Verdict(False, ok, f"{detail}: {'a near tie' if ok else 'not a near tie'}", n, i, margin)


@pytest.fixture(scope="module")
def engines(default_model_path: str) -> dict[Any, HammerEngine]:
    out: dict[Any, HammerEngine] = {ff: HammerEngine(backend=LlamaCppBackend(default_model_path, n_ctx=4096,
                                                                           fast_forward=ff)) for ff in (False, True)}
    out[DRAFTS] = HammerEngine(backend=LlamaCppBackend(default_model_path, n_ctx=4096, draft_tokens=8))
    return out


@pytest.fixture(scope="module")
def recorders(engines: dict[Any, HammerEngine]) -> dict[Any, Recorder]:
    out = {}
    for key, engine in engines.items():
        backend = engine.backend
        assert isinstance(backend, LlamaCppBackend)
        out[key] = Recorder(backend)
        backend._hammer_test_recorder = out[key]  # type: ignore[attr-defined]
    return out


@pytest.fixture(scope="module")
def tool_sets(demo_tools: list[Any]) -> dict[str, list[Any]]:
    return {"demo": demo_tools, "file": load_tools_file("examples/tools.json")[0]}


@pytest.fixture(scope="module")
def answers(engines: dict[Any, HammerEngine], tool_sets: dict[str, list[Any]],
            recorders: dict[Any, Recorder]) -> dict[Any, list[Any]]:
    out: dict[Any, list[Any]] = {}
    for key, engine in engines.items():
        out[key] = []
        for t, q, options in QUESTIONS:
            before = len(recorders[key].calls)
            reply = engine.generate([Message.user(q)], tools=tool_sets[t], **options)
            reply._test_calls = recorders[key].calls[before:]  # type: ignore[attr-defined]
            out[key].append(reply)
    return out


@pytest.fixture(scope="module")
def verdicts(answers: dict[Any, list[Any]], engines: dict[Any, HammerEngine]) -> dict[Any, list[Verdict]]:
    plain_backend = engines[False].backend
    assert isinstance(plain_backend, LlamaCppBackend)
    return {key: [near_tie_verdict(p._test_calls, f._test_calls, plain_backend)
                  for p, f in zip(answers[False], answers[key], strict=True)]
            for key in (True, DRAFTS)}


@pytest.mark.parametrize("accelerated", [True, DRAFTS])
def test_fast_forward_gives_the_same_answers_up_to_near_ties(answers: dict[Any, list[Any]],
                                                             verdicts: dict[Any, list[Verdict]],
                                                             accelerated: Any) -> None:
    # Every question, the last one's degenerate loop of invented calls included (cut at LOOP_TOKENS): where a
    # tie deep inside it flips (it did, uncapped: LHR->CDG vs LHR->AMS at character 691 with drafts), the
    # near-tie property covers it.
    for i, (plain, fast, verdict) in enumerate(zip(answers[False], answers[accelerated], verdicts[accelerated],
                                                   strict=True)):
        assert verdict.ok, f"question {i} ({QUESTIONS[i][1]!r}): {verdict.message}"
        if verdict.equal:
            assert fast.raw == plain.raw, i
            assert fast.finish_reason == plain.finish_reason, i
            assert fast.usage.completion_tokens == plain.usage.completion_tokens, i
        else:
            # After the tie the answers go their own ways: their ends and lengths need not match.
            print(f"question {i}: differs at a near tie: {verdict.message}")
    assert answers[accelerated][6].finish_reason == "length"  # the max_tokens cut is among them
    assert answers[False][6].finish_reason == "length"
    # Plain greedy's answers to questions 0, 1, 3 and 4 have no choice closer than 0.72 logits (all
    # others have one below 0.5): no tie to flip there, so they must come out equal on any CPU.
    assert all(verdicts[accelerated][i].equal for i in (0, 1, 3, 4)), [v.message for v in verdicts[accelerated]]


def test_the_check_catches_a_changed_token(answers: dict[Any, list[Any]], engines: dict[Any, HammerEngine]) -> None:
    """The property can fail: a forced token swapped for another, or a freely chosen token swapped for
    the runner-up where plain greedy's margin is wide, are both reported."""
    plain_backend = engines[False].backend
    assert isinstance(plain_backend, LlamaCppBackend)
    llama = plain_backend.llama
    n_vocab = llama.n_vocab()
    reply = answers[False][2]  # plain greedy's e-mail: forced tokens (a tool name's tail) and free ones (the body)
    calls: list[Call] = reply._test_calls
    call = calls[0]
    tokens = call.tokens
    mask = fresh_mask(plain_backend, call)
    forced_at = wide_at = None
    llama.reset()
    llama.eval(call.prompt_tokens)
    for k, token in enumerate(tokens):
        allowed = mask.allowed(n_vocab)
        if allowed.sum() == 1 and forced_at is None:
            forced_at = k
        elif allowed.sum() > 1 and wide_at is None:
            logits = np.where(allowed, np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(n_vocab,)), -np.inf)
            top = np.sort(logits)[-2:]
            if top[1] - top[0] > 1.0:
                wide_at = (k, int(np.argsort(logits)[-2]))
        if forced_at is not None and wide_at is not None:
            break
        mask.consume([token])
        llama.eval([token])
    assert forced_at is not None and wide_at is not None

    def mutated(k: int, token: int) -> list[Call]:
        other = Call(call.prompt_tokens, call.grammar, call.loop_guard, consumed=[*tokens[:k], token],
                     ends=call.ends)
        return [other]

    swapped = (tokens[forced_at] + 1) % n_vocab
    verdict = near_tie_verdict(calls, mutated(forced_at, swapped), plain_backend)
    assert not verdict.ok and "breaks the grammar" in verdict.message, verdict.message
    k, runner_up = wide_at
    verdict = near_tie_verdict(calls, mutated(k, runner_up), plain_backend)
    assert not verdict.ok and "not a near tie" in verdict.message and verdict.margin > 1.0, verdict.message
    assert near_tie_verdict(calls, calls, plain_backend).equal


def test_drafts_are_accepted_where_the_answer_copies_the_prompt(answers: dict[Any, list[Any]]) -> None:
    drafted = [r.timings["drafted_tokens"] for r in answers[DRAFTS]]
    assert sum(drafted) > 0, drafted  # e.g. an e-mail address or a city copied from the question
    assert all("drafted_tokens" not in r.timings for r in answers[True])


def test_forced_tokens_skip_the_model(answers: dict[Any, list[Any]]) -> None:
    forced = [r.timings["forced_tokens"] for r in answers[True]]
    assert sum(forced) >= len(forced)  # e.g. the rest of a tool name once its first token is chosen
    assert all("forced_tokens" not in r.timings for r in answers[False])


def test_streamed_pieces_add_up_to_the_answer(engines: dict[Any, HammerEngine], tool_sets: dict[str, list[Any]],
                                              answers: dict[Any, list[Any]]) -> None:
    from hammer_plugins.engine import TextDelta

    events = list(engines[True].stream([Message.user(QUESTIONS[3][1])], tools=tool_sets["demo"]))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == answers[True][3].raw and len([e for e in events if isinstance(e, TextDelta)]) > 3
