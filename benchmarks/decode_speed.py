"""Decoding speed of constrained answers: fast-forward on and off, against plain llama-cpp-python.

Side by side in one process, on the same questions, interleaved question by question:

* **plain**: llama-cpp-python's ``create_completion`` on the very prompt the engine renders,
  greedy, no grammar, ``max_tokens`` set to the number of tokens the engine's answer had (so it
  decodes as many tokens: the floor of one model run per token);
* **engine, one token a step**: ``LlamaCppBackend(fast_forward=False)``, the grammar as a logits
  processor in llama-cpp-python's loop;
* **engine, fast-forward**: ``LlamaCppBackend()`` (the default): the tokens the grammar forces are
  taken without running the model and evaluated in one batch with the next chosen token;
* **engine, fast-forward + drafts**: ``LlamaCppBackend(draft_tokens=K)``: each batch also carries up
  to K prompt-lookup draft tokens, kept while greedy decoding agrees (``--draft-tokens``, default 8).

Every call after the first reuses the tools prefix from the KV cache, as in an agent loop; each
figure is the median over ``--repeats`` runs of every question. Prints decode ms per token
((total - time to first token) / (tokens - 1)) and end-to-end seconds, with ratios to plain.

The fast paths must give plain greedy's answers (the one-token-a-step row) except at a near tie:
a batch's logits are not bit-identical to one token's, so where plain greedy's two best allowed
tokens are within :data:`EPSILON` logits the other may win, depending on the CPU (the property
``tests/real/test_fast_forward.py`` checks and the llama_cpp backend documents). Where answers
differ, :func:`near_tie` replays plain greedy's logits at the first differing token; the script
fails only when the two tokens there are not a near tie, and reports the near ties it saw.

Usage::

    .venv/bin/python benchmarks/decode_speed.py [--threads 2] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

EPSILON = 0.5
"""Logits within which two allowed tokens are a near tie (as in tests/real/test_fast_forward.py)."""
QUESTIONS = [
    "What's the weather in Paris?",
    "What is 23 * 47?",
    "Email bob@example.com that the meeting moved to 3pm.",
    "Weather in Rome and Oslo, in fahrenheit",
    "What time is it in UTC+2?",
    "Send an email to carol@example.org with subject Lunch and body See you at noon",
]


def _plain(llama: Any, prompt: str, n_tokens: int) -> tuple[float, float]:
    tokens = llama.tokenize(prompt.encode(), add_bos=False, special=True)
    started = time.perf_counter()
    first = None
    for _chunk in llama.create_completion(tokens, max_tokens=n_tokens, temperature=0.0, top_k=0, top_p=1.0,
                                          repeat_penalty=1.0, stream=True):
        first = first or time.perf_counter()
    return (first or started) - started, time.perf_counter() - started


def near_tie(llama: Any, prompt: str, reference: str, other: str) -> tuple[bool, str]:
    """Whether ``other`` leaves plain greedy's ``reference`` answer only at a near tie.

    Both answers are tokenized; at the first token where they differ, plain greedy's logits are
    recomputed one token at a time after the prompt and the common prefix (as llama-cpp-python's
    loop evaluates them), and the two tokens (an end-of-generation token where an answer ended)
    must be less than :data:`EPSILON` apart. Both were picked under the same grammar, so both are
    allowed there and their logit gap is the margin the grammar mask leaves. Returns (ok, detail).
    """
    ref = llama.tokenize(reference.encode(), add_bos=False, special=False)
    alt = llama.tokenize(other.encode(), add_bos=False, special=False)
    if ref == alt:
        return True, "equal"
    i = next((k for k, (a, b) in enumerate(zip(ref, alt, strict=False)) if a != b), min(len(ref), len(alt)))
    llama.reset()
    llama.eval(llama.tokenize(prompt.encode(), add_bos=False, special=True))
    for token in ref[:i]:
        llama.eval([token])
    logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),)).copy()
    ends = {llama.token_eos(), *llama.tokenize(b"<|im_end|>", add_bos=False, special=True)[:1]}
    end = max(ends, key=lambda t: logits[t])

    def pick(tokens: list[int]) -> int:
        return tokens[i] if i < len(tokens) else end

    a, b = pick(ref), pick(alt)
    margin = float(logits[a] - logits[b])
    def text(tokens: list[int]) -> str:
        return llama.detokenize(tokens).decode("utf-8", errors="replace")

    detail = (f"token {i} (after {text(ref[:i])[-40:]!r}): plain greedy {text([a])!r} {logits[a]:.3f}, "
              f"the fast path {text([b])!r} {logits[b]:.3f}, margin {margin:.3f} (near tie below {EPSILON})")
    return abs(margin) < EPSILON, detail


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--draft-tokens", type=int, default=8)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    from hammer_plugins import HammerEngine, Message
    from hammer_plugins.backends.llama_cpp import LlamaCppBackend
    from hammer_plugins.models.source import default_model_path
    from hammer_plugins.tools.demo import DEMO_TOOLS

    path = str(default_model_path())
    engines = {name: HammerEngine(backend=LlamaCppBackend(path, n_ctx=4096, n_threads=args.threads, fast_forward=ff,
                                                          draft_tokens=k))
               for name, ff, k in (("one token a step", False, 0), ("fast-forward", True, 0),
                                   ("fast-forward + drafts", True, args.draft_tokens))}
    plain_backend = LlamaCppBackend(path, n_ctx=4096, n_threads=args.threads)  # kept: it owns the model
    plain_llama = plain_backend.llama
    for engine in engines.values():  # the tools prefix into each KV cache
        engine.generate([Message.user("hi")], tools=DEMO_TOOLS)
    _plain(plain_llama, engines["fast-forward"].render([Message.user("hi")], DEMO_TOOLS), 4)

    rows: dict[str, dict[str, list[float]]] = {k: {"decode_ms": [], "total_s": []}
                                               for k in ("plain", *engines)}
    forced = produced = drafted = 0
    near_ties: list[str] = []
    for _ in range(args.repeats):
        for question in QUESTIONS:
            messages = [Message.user(question)]
            answers = {}
            for name, engine in engines.items():
                response = engine.generate(messages, tools=DEMO_TOOLS)
                answers[name] = response.raw
                n = response.usage.completion_tokens
                t, decoding = response.timings, response.decoding
                rows[name]["decode_ms"].append(1000 * (t.total - t.time_to_first_token) / max(n - 1, 1))
                rows[name]["total_s"].append(t.total)
                if name == "fast-forward":
                    forced += decoding.forced_tokens or 0
                    produced += n
                drafted += decoding.drafted_tokens or 0
            reference = answers["one token a step"]
            for name in ("fast-forward", "fast-forward + drafts"):
                if answers[name] != reference:  # rare: judge it by plain greedy's own logits there
                    ok, detail = near_tie(plain_llama, engines[name].render(messages, DEMO_TOOLS), reference,
                                          answers[name])
                    assert ok, f"{name} left plain greedy's answer to {question!r} at no near tie: {detail}"
                    near_ties.append(f"{name}, {question!r}: {detail}")
            ttft, total = _plain(plain_llama, engines["fast-forward"].render(messages, DEMO_TOOLS), n)
            rows["plain"]["decode_ms"].append(1000 * (total - ttft) / max(n - 1, 1))
            rows["plain"]["total_s"].append(total)

    medians = {k: {m: statistics.median(v) for m, v in cols.items()} for k, cols in rows.items()}
    base = medians["plain"]
    print(f"{Path(path).name}, {args.threads} threads, {len(QUESTIONS)} questions x {args.repeats}; "
          f"{forced} of {produced} answer tokens forced by the grammar ({100 * forced / max(produced, 1):.1f}%), "
          f"{drafted} taken from accepted drafts ({100 * drafted / max(produced, 1):.1f}%)")
    for line in near_ties:
        print(f"answer differed at a near tie: {line}")
    print("| decoding | decode ms/token | ratio | end-to-end s | ratio |\n|---|---|---|---|---|")
    for name, m in medians.items():
        print(f"| {name} | {m['decode_ms']:.1f} | {m['decode_ms'] / base['decode_ms']:.2f} | "
              f"{m['total_s']:.2f} | {m['total_s'] / base['total_s']:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"medians": medians, "forced": forced, "produced": produced, "drafted": drafted,
                                               "near_ties": near_ties, "runs": rows}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
