"""Constrained decoding against plain llama-cpp-python, per token, on the same prompts.

Side by side in one process, interleaved question by question and repeat by repeat, so that the
machine's noise hits every row alike:

* **plain**: llama-cpp-python's own greedy loop (``Llama.generate``: llama.cpp's sampler, no
  grammar, no logits processor) on the very prompt the engine renders, stopped after exactly as
  many tokens as the engine's answer had (a step costs the same whichever token it picks);
* **engine**: ``HammerEngine`` on ``LlamaCppBackend`` (the default: grammar, loop guard, forced-token
  fast-forward, sample first and check after);
* **engine, full mask**: the same backend with ``decoder.full_mask`` (the mask computed and
  applied at every step, as the first constrained loop did), for reference.

Every call reuses the tools prefix from the KV cache, as in an agent loop (both loops skip the shared
prefix). Decode ms per token is (total - time to first token) / (tokens - 1) for all three. The
questions cover string arguments, numbers, several calls and a refusal. Prints per-question medians
over ``--repeats`` and the median of the per-run ratios to plain.

``--profile`` instead times where one answer's decode time goes, step by step (the model runs, the
mask, the single-token check, consuming a token, the cancel check, detokenizing; the rest is the
Python loop, argmax, streaming and the engine's callbacks), for both engine paths.

Usage::

    .venv/bin/python benchmarks/constrained_speed.py [--threads 2] [--repeats 5] [--json out.json]
    .venv/bin/python benchmarks/constrained_speed.py --profile [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

QUESTIONS = [
    "What's the weather in Paris?",                          # the README's question: one string argument
    "What is 23 * 47?",                                      # numbers
    "Email bob@example.com that the meeting moved to 3pm.",  # long strings
    "Weather in Rome and Oslo, in fahrenheit",               # several calls
    "Tell me a joke",                                        # a refusal (no tool fits)
    "Send an email to carol@example.org with subject Lunch and body See you at noon",
]


def _plain(llama: Any, prompt_tokens: list[int], n_tokens: int) -> float:
    """ms per token of llama-cpp-python's greedy loop, ``n_tokens`` tokens (the first one's time excluded)."""
    started = time.perf_counter()
    first = None
    produced = 0
    for _token in llama.generate(prompt_tokens, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0):
        produced += 1
        if first is None:
            first = time.perf_counter()
        if produced >= n_tokens:
            break
    done = time.perf_counter()
    return 1000 * (done - (first or started)) / max(n_tokens - 1, 1)


def _engine(engine: Any, messages: list[Any], tools: list[Any]) -> tuple[float, int, str]:
    response = engine.generate(messages, tools=tools)
    t = response.timings
    n = response.usage.completion_tokens
    return 1000 * (t.total - t.time_to_first_token) / max(n - 1, 1), n, response.raw


class _Timers:
    """Wraps methods of one object with wall-clock timers (the profile's rows)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def wrap(self, owner: Any, method: str, row: str) -> None:
        inner: Callable[..., Any] = getattr(owner, method)
        seconds, calls, clock = self.seconds, self.calls, time.perf_counter

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = clock()
            try:
                return inner(*args, **kwargs)
            finally:
                seconds[row] += clock() - started
                calls[row] += 1

        setattr(owner, method, timed)


def _profile(engine: Any, backend: Any, messages: list[Any], tools: list[Any], repeats: int, full: bool) -> dict[str, Any]:
    """Median per-token ms of each part of the decode, over ``repeats`` answers."""
    backend.decoder.full_mask = full
    rows: dict[str, list[float]] = defaultdict(list)
    make_mask = backend.vocabulary.token_mask
    for _ in range(repeats):
        timers = _Timers()

        def profiled_mask(grammar: Any, loop_guard: bool, timers: _Timers = timers) -> Any:
            mask = make_mask(grammar, loop_guard)
            timers.wrap(mask, "allowed", "full mask (llguidance + unpack + loop-guard cut)")
            timers.wrap(mask, "allows", "single-token check (sample first)")
            timers.wrap(mask, "may_force", "forced-bytes check")
            timers.wrap(mask, "consume", "consume token (llguidance + loop guard)")
            return mask

        backend.vocabulary.token_mask = profiled_mask
        llama = backend.llama
        # _evaluate runs the model inside the decode loop only (the prompt goes through the backend's evaluate).
        timers.wrap(backend.decoder, "_evaluate", "model runs (forward pass, logits view)")
        timers.wrap(llama, "detokenize", "detokenize")
        timers.wrap(backend, "_check_cancel", "cancel check")
        response = engine.generate(messages, tools=tools)
        t = response.timings
        decode = t.total - t.time_to_first_token
        del llama.detokenize, backend.decoder._evaluate, backend._check_cancel
        backend.vocabulary.token_mask = make_mask
        n = response.usage.completion_tokens
        per = max(n - 1, 1)
        rows["decode total"].append(1000 * decode / per)
        # The cancel check also runs once before the prompt: a few microseconds, left in.
        for name, seconds in timers.seconds.items():
            rows[name].append(1000 * seconds / per)
        rest = decode - sum(timers.seconds.values())
        rows["rest: Python loop, argmax, streaming, engine callbacks"].append(1000 * rest / per)
        rows["model runs per answer (count)"].append(float(timers.calls["model runs (forward pass, logits view)"]))
        rows["answer tokens (count)"].append(float(n))
    backend.decoder.full_mask = False
    return {name: statistics.median(values) for name, values in rows.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="time the parts of one answer's decode instead")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    from hammer_plugins import HammerEngine, Message
    from hammer_plugins.backends.llama_cpp import LlamaCppBackend
    from hammer_plugins.models.source import default_model_path
    from hammer_plugins.tools.demo import DEMO_TOOLS

    path = str(default_model_path())
    backend = LlamaCppBackend(path, n_ctx=4096, n_threads=args.threads)
    engine = HammerEngine(backend=backend)
    engine.generate([Message.user("hi")], tools=DEMO_TOOLS)  # the tools prefix into the KV cache
    if args.profile:
        return _print_profile(engine, backend, [Message.user(QUESTIONS[0])], DEMO_TOOLS, args)
    plain_backend = LlamaCppBackend(path, n_ctx=4096, n_threads=args.threads)  # kept: it owns the model
    plain_llama = plain_backend.llama
    prompts = {q: plain_backend.tokenize(engine.render([Message.user(q)], DEMO_TOOLS)) for q in QUESTIONS}
    _plain(plain_llama, prompts[QUESTIONS[0]], 4)  # the tools prefix into the plain KV cache

    ms: dict[str, dict[str, list[float]]] = {q: {"plain": [], "engine": [], "full mask": []} for q in QUESTIONS}
    tokens: dict[str, int] = {}
    for _ in range(args.repeats):
        for question in QUESTIONS:
            messages = [Message.user(question)]
            answers = {}
            for name, full in (("engine", False), ("full mask", True)):
                backend.decoder.full_mask = full
                per_token, n, raw = _engine(engine, messages, DEMO_TOOLS)
                ms[question][name].append(per_token)
                answers[name] = raw
                tokens[question] = n
            backend.decoder.full_mask = False
            if answers["engine"] != answers["full mask"]:  # a near tie may flip (the differential test's rule)
                print(f"note: the two engine paths answered {question!r} differently")
            ms[question]["plain"].append(_plain(plain_llama, prompts[question], tokens[question]))

    import os

    load = os.getloadavg()
    print(f"{Path(path).name}, {args.threads} threads, {len(QUESTIONS)} questions x {args.repeats} repeats, "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("| question | tokens | plain ms/token | engine ms/token | ratio | full mask ms/token | ratio |\n"
          "|---|---|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {"engine": [], "full mask": []}
    for question, rows in ms.items():
        med = {k: statistics.median(v) for k, v in rows.items()}
        for name in ratios:
            ratios[name].extend(e / p for e, p in zip(rows[name], rows["plain"], strict=True))
        print(f"| {question} | {tokens[question]} | {med['plain']:.1f} | {med['engine']:.1f} | "
              f"{med['engine'] / med['plain']:.2f} | {med['full mask']:.1f} | {med['full mask'] / med['plain']:.2f} |")
    overall = {name: statistics.median(values) for name, values in ratios.items()}
    print(f"median per-run ratio to plain: engine {overall['engine']:.3f}, full mask {overall['full mask']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"ms_per_token": ms, "tokens": tokens, "median_ratio": overall,
                                               "load": load, "threads": args.threads}, indent=2), encoding="utf-8")
    return 0


def _print_profile(engine: Any, backend: Any, messages: list[Any], tools: list[Any], args: argparse.Namespace) -> int:
    import os

    results = {}
    for name, full in (("full mask at every step", True), ("sample first, check after", False)):
        results[name] = _profile(engine, backend, messages, tools, args.repeats, full)
    load = os.getloadavg()
    print(f"{args.threads} threads, median of {args.repeats} answers, load average {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f}; ms per answer token")
    names = list(dict.fromkeys(k for r in results.values() for k in r))
    print("| part | " + " | ".join(results) + " |\n|---|" + "---|" * len(results))
    for part in names:
        print(f"| {part} | " + " | ".join(f"{r.get(part, 0.0):.3f}" for r in results.values()) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"profile": results, "load": load}, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
