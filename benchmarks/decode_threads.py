"""Plain llama-cpp-python decode speed by thread count, side by side: the default thread count.

Loads the default model once per row and round (a new ``llama_cpp.Llama`` each time, as a new
process would), evaluates a 100-token prompt and streams ``--tokens`` tokens greedily with the
end-of-generation token forbidden, rows interleaved round by round. Decode ms per token is
(last token - first token) / (tokens - 1). The rows are llama-cpp-python's own default (half the
logical CPUs), the engine's default (one per physical core) and every count from 1 to the CPUs.

Usage::

    .venv/bin/python benchmarks/decode_threads.py [--rounds 7] [--tokens 48] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import time
from pathlib import Path
from typing import Any

PROMPT = "Write a long story about a cat who travels the world. " * 8


def decode_ms(llama_cpp: Any, path: str, threads: int, tokens: int) -> float:
    llm = llama_cpp.Llama(model_path=path, n_ctx=2048, n_threads=threads, verbose=False)
    ends = [llm.token_eos()]

    def no_end(_ids: Any, logits: Any) -> Any:
        logits[ends] = -float("inf")
        return logits

    stamps = [time.perf_counter() for _ in llm.create_completion(
        PROMPT, max_tokens=tokens, temperature=0.0, stream=True, logits_processor=llama_cpp.LogitsProcessorList([no_end]))]
    llm.close()
    return (stamps[-1] - stamps[0]) * 1000 / (len(stamps) - 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    import llama_cpp

    from hammer_plugins.models.source import default_model_path
    from hammer_plugins.support.cpu_threads import physical_cores

    path = str(default_model_path())
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    counts = sorted(set(range(1, cpus + 1)))
    defaults = {"llama-cpp-python default": max(multiprocessing.cpu_count() // 2, 1), "engine default": physical_cores()}
    runs: dict[int, list[float]] = {n: [] for n in counts}
    for _ in range(args.rounds):
        for n in counts:
            runs[n].append(decode_ms(llama_cpp, path, n, args.tokens))
        print({n: round(v[-1], 1) for n, v in runs.items()}, flush=True)
    medians = {n: statistics.median(v) for n, v in runs.items()}
    print("| threads | median decode ms/token |\n|---|---|")
    for n in counts:
        who = ", ".join(name for name, value in defaults.items() if value == n)
        print(f"| {n}{f' ({who})' if who else ''} | {medians[n]:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"model": Path(path).name, "rounds": args.rounds, "tokens": args.tokens,
                                               "defaults": defaults, "median_ms": medians, "runs_ms": runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
