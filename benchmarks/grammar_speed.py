"""Constrained decoding speed on llama.cpp: llama.cpp's own grammar sampler vs the llguidance mask.

Both decode the same HammerBench snapshots greedily with the same grammar (GBNF and Lark notation); the prompt is
evaluated before the clock starts, so only generation is timed. Prints milliseconds per generated
token for each and whether the two outputs are identical.

    .venv/bin/python benchmarks/grammar_speed.py --records 3 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import time

import llama_cpp

from hammer_evals.datasets import hammerbench_dir
from hammer_evals.hammerbench.data import load_file, to_bench_tools
from hammer_evals.hammerbench.runner import RunnerConfig, snapshot_prompt
from hammer_plugins import HammerEngine
from hammer_plugins.grammar.token_mask import LogitsMask
from hammer_plugins.prompt.render import STOP_SEQUENCES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(hammerbench_dir()), help="default: the copy shipped in the package")
    parser.add_argument("--records", type=int, default=3, help="records of ST_Perfect and of HammerBench_Based")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--model-path", default=None)
    args = parser.parse_args()

    engine = HammerEngine(model_path=args.model_path, n_threads=args.threads)
    backend = engine.backend
    llama = backend.llama
    config = RunnerConfig()
    per_token: dict[str, list[float]] = {"llama.cpp grammar": [], "llguidance mask": []}
    same = 0
    total = 0
    for stem in ["ST_Perfect", "HammerBench_Based"]:
        for record in load_file(args.data, stem, limit=args.records):
            for turn in record.turns:
                prompt = snapshot_prompt(engine, turn, config)
                grammar = engine.bind(to_bench_tools(turn.tools), None).grammar("auto", False, partial_calls=True)
                tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
                texts = {}
                for label in per_token:
                    llama.reset()
                    llama.eval(tokens)  # the prompt is not what we time
                    kwargs: dict = {"max_tokens": 256, "temperature": 0.0, "stop": list(STOP_SEQUENCES)}
                    if label == "llama.cpp grammar":
                        kwargs["grammar"] = llama_cpp.LlamaGrammar.from_string(grammar.gbnf, verbose=False)
                    else:
                        kwargs["logits_processor"] = llama_cpp.LogitsProcessorList(
                            [LogitsMask(backend.vocabulary.token_mask(grammar, loop_guard=False), len(tokens))])
                    started = time.perf_counter()
                    out = llama.create_completion(tokens, **kwargs)
                    seconds = time.perf_counter() - started
                    n = max(1, out["usage"]["completion_tokens"])
                    per_token[label].append(1000 * seconds / n)
                    texts[label] = out["choices"][0]["text"]
                total += 1
                same += len(set(texts.values())) == 1
    for label, values in per_token.items():
        print(f"{label:18s} median {statistics.median(values):6.1f} ms/token over {len(values)} snapshots")
    print(f"identical output: {same}/{total}")


if __name__ == "__main__":
    main()
