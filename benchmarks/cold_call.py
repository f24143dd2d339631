"""The README's main job, a new process each time, against a plain llama-cpp-python floor.

Side by side in one run, interleaved round by round so that machine noise hits every row alike:

* **floor**: a plain llama-cpp-python script (a new process) that loads the same GGUF, evaluates
  the very prompt ``hammer call`` renders and greedily generates as many tokens as ``hammer call``
  did, one per step, with no grammar and nothing cached. Unconstrained, the model answers this
  prompt in 18 tokens of prose and stops, so the floor forbids the end-of-generation tokens: it
  decodes exactly as many tokens as ``hammer call`` (the benchmark checks the count), since a
  step costs the same whichever token it picks;
* **hammer call, cold**: a tool set the cache has never seen, on a model it has: no prefix state
  is stored (it evaluates the whole prompt and stores the prefix's state), the model's tokenizer
  vocabulary is (read by any earlier call, e.g. the README's first command);
* **hammer call, first ever**: every cache empty, the vocabulary read from the model file too;
* **hammer call, repeat**: the same command again (the tools prefix's KV state comes from the cache);
* **hammer call --no-prefix-cache**: every run pays the whole prompt and the vocabulary.

Prints medians (wall seconds of the whole process), the ratio of each to the floor's, and the median
of the per-round ratios.

Usage::

    .venv/bin/python benchmarks/cold_call.py [--rounds 5] [--threads 2] [--readme-command] [--json out.json]

``--threads`` is the floor's thread count and, unless ``--readme-command``, ``hammer call``'s too;
with ``--readme-command`` the ``hammer call`` rows run the README's command exactly as written (no
``--threads``: the engine's default).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUERY = "What's the weather in Paris?"
FLOOR = """
import sys, llama_cpp
path, prompt_file, n_out, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ends = [int(t) for t in sys.argv[5].split(",")]
llm = llama_cpp.Llama(model_path=path, n_ctx=8192, n_threads=threads, verbose=False)
tokens = llm.tokenize(open(prompt_file, encoding="utf-8").read().encode(), add_bos=False, special=True)
def no_end(_ids, logits):
    logits[ends] = -float("inf")
    return logits
out = llm.create_completion(tokens, max_tokens=n_out, temperature=0.0, top_k=0, top_p=1.0, repeat_penalty=1.0,
                            logits_processor=llama_cpp.LogitsProcessorList([no_end]))
print(out["usage"]["completion_tokens"])
"""


def _timed(command: list[str], env: dict[str, str], expect: str | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, check=True, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    elapsed = time.perf_counter() - started
    if expect is not None and done.stdout.strip() != expect:
        raise SystemExit(f"{command[0]} printed {done.stdout.strip()!r}, expected {expect!r}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--readme-command", action="store_true",
                        help="hammer call without --threads (its default), as the README runs it")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    from hammer_plugins import HammerEngine, Message
    from hammer_plugins.backends.prefix_cache import PrefixCache
    from hammer_plugins.models.source import default_model_path
    from hammer_plugins.tools.demo import DEMO_TOOLS

    model = str(default_model_path())
    engine = HammerEngine(n_threads=args.threads)
    response = engine.generate([Message.user(QUERY)], tools=DEMO_TOOLS)
    n_out = response.usage.completion_tokens
    answer = json.dumps([{"name": c.name, "arguments": c.arguments} for c in response.tool_calls],
                        ensure_ascii=False)  # what `hammer call` prints
    # The end-of-generation tokens the floor forbids, found here so that it does not pay the search.
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(engine.backend.llama.model)
    ends = ",".join(str(t) for t in range(engine.backend.llama.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t))
    work = Path(tempfile.mkdtemp(prefix="cold-call-"))
    prompt_file = work / "prompt.txt"
    prompt_file.write_text(engine.render([Message.user(QUERY)], DEMO_TOOLS), encoding="utf-8")
    floor_script = work / "floor.py"
    floor_script.write_text(FLOOR, encoding="utf-8")
    # A private prefix cache; the model itself stays where it is.
    kv_dir = work / "kv"
    env = {**os.environ, "HAMMER_PREFIX_CACHE_DIR": str(kv_dir)}
    hammer = [str(ROOT / ".venv/bin/hammer"), "call", QUERY, *([] if args.readme_command else ["--threads", str(args.threads)])]
    rows: dict[str, list[float]] = {"floor": [], "cold": [], "first ever": [], "repeat": [], "no prefix cache": []}
    for _ in range(args.rounds):
        rows["floor"].append(_timed([sys.executable, str(floor_script), model, str(prompt_file), str(n_out),
                                     str(args.threads), ends], env, expect=str(n_out)))
        shutil.rmtree(kv_dir, ignore_errors=True)
        rows["first ever"].append(_timed(hammer, env, expect=answer))
        PrefixCache(kv_dir).clear(keep_vocabularies=True)
        rows["cold"].append(_timed(hammer, env, expect=answer))
        rows["repeat"].append(_timed(hammer, env, expect=answer))
        rows["no prefix cache"].append(_timed([*hammer, "--no-prefix-cache"], env, expect=answer))
    floor = statistics.median(rows["floor"])
    result = {"model": Path(model).name, "threads": args.threads, "readme_command": args.readme_command, "rounds": args.rounds,
              "prompt_tokens": response.usage.prompt_tokens, "completion_tokens": n_out,
              "median_s": {k: statistics.median(v) for k, v in rows.items()}, "runs_s": rows}
    print(f"{result['model']}, {result['prompt_tokens']} prompt + {n_out} completion tokens, "
          f"floor on {args.threads} threads, hammer call on "
          f"{'its default' if args.readme_command else args.threads}, median of {args.rounds} rounds")
    # Each round's rows ran back to back: the median of the per-round ratios resists the machine's drift.
    per_round = {name: statistics.median(v / f for v, f in zip(values, rows["floor"], strict=True))
                 for name, values in rows.items()}
    result["median_round_ratio"] = per_round
    result["ratio_to_floor"] = {name: statistics.median(values) / floor for name, values in rows.items()}
    print("| run | median wall s | ratio to floor | median per-round ratio |\n|---|---|---|---|")
    for name, values in rows.items():
        print(f"| {name} | {statistics.median(values):.2f} | {statistics.median(values) / floor:.2f} "
              f"| {per_round[name]:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
