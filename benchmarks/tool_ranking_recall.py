"""Recall of text-ranking methods that pick which tools to show a small function-calling model (no model runs).

Each BFCL v4 simple_python and multiple question (600) ranks a pool of real BFCL functions (distinct by name and
description, from simple_python, multiple, parallel, parallel_multiple, live_simple and live_multiple) with its user
text as the query. A question's pool is its right function (from the ground truth) plus random others (seed 0; others
of the same name are left out), in sizes 10, 100, 1000 and all. Recorded per method and size: recall@k (the right
function within the top k; ties count against it); index-build and per-query times at 1000; and the ROC AUC of the top
score separating those questions from irrelevance and live_irrelevance ones (no function fits), at pool 1000 and with
each question's own functions. Methods: BM25 (bm25s, four tokenizations; rank-bm25 as a cross-check), WordLlama
embeddings (cosine, offline weights), and BM25 + WordLlama fused by reciprocal rank or by min-max-scaled scores.

Usage (numpy, bm25s, rank-bm25, PyStemmer and wordllama in a venv of their own)::

    python3 -m venv /tmp/rankvenv && /tmp/rankvenv/bin/pip install bm25s rank-bm25 wordllama numpy PyStemmer
    /tmp/rankvenv/bin/python benchmarks/tool_ranking_recall.py [--sizes 10,100,1000,all] [--hybrid-bm25 bm25s/own]
        [--json docs/benchmarks/tools/ranking_recall.json]
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata as md
import json
import logging
import math
import os
import pathlib
import platform
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import bm25s
import numpy as np
import Stemmer
import wordllama
from bm25s.stopwords import STOPWORDS_EN
from rank_bm25 import BM25Okapi
from wordllama import WordLlama

ROOT = Path(__file__).resolve().parents[1]
POOL_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple")
RELEVANT, IRRELEVANT = ("simple_python", "multiple"), ("irrelevance", "live_irrelevance")
KS = (1, 3, 5, 10, 20)
STOP, STEMMER = frozenset(STOPWORDS_EN), Stemmer.Stemmer("english")
logging.getLogger("bm25s").setLevel(logging.WARNING)  # bm25s logs each index build at DEBUG


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def split_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", " ", re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name))


def param_text(properties: dict) -> list[str]:
    parts = []
    for name, spec in (properties or {}).items():
        spec = spec if isinstance(spec, dict) else {}
        parts += [split_name(name), str(spec.get("description", ""))] + param_text(spec.get("properties", {}))
        if isinstance(spec.get("items"), dict):
            parts += param_text(spec["items"].get("properties", {}))
    return parts


def function_text(fn: dict) -> str:
    """The name split into words, the raw name, the description, and each (nested) parameter's name and description."""
    parts = [split_name(fn["name"]), fn["name"], fn.get("description", "")]
    return " ".join(parts + param_text(fn.get("parameters", {}).get("properties", {})))


def query_text(row: dict) -> str:
    return " ".join(m["content"] for turn in row["question"] for m in turn if m["role"] == "user")


def own_tokens(texts: list[str], stem: bool = False) -> list[list[str]]:
    out = [[t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in STOP] for text in texts]
    return [STEMMER.stemWords(toks) for toks in out] if stem else out


def lib_tokens(texts: list[str], stem: bool = False) -> list[list[str]]:
    return bm25s.tokenize(texts, stopwords="en", stemmer=STEMMER if stem else None, return_ids=False, show_progress=False)


TOKENIZERS = {"own": own_tokens, "own+stem": lambda t: own_tokens(t, True),
              "bm25s": lib_tokens, "bm25s+stem": lambda t: lib_tokens(t, True)}


def bm25s_index(docs: list[list[str]]) -> bm25s.BM25:
    index = bm25s.BM25()
    index.index(docs, show_progress=False)
    return index


def bm25s_query(index: bm25s.BM25, query: list[str]) -> np.ndarray:
    return index.get_scores(query) if query else np.zeros(index.scores["num_docs"])


def idf_sum(doc_sets: list[set[str]], query: list[str]) -> float:
    """Lucene idf (bm25s' default) of each query token over the pool, summed: the top score's scale."""
    n = len(doc_sets)
    return sum(math.log(1 + (n - df + 0.5) / (df + 0.5)) for df in (sum(t in s for s in doc_sets) for t in query))


def ordinal(scores: np.ndarray) -> np.ndarray:
    ranks = np.empty(len(scores))
    ranks[np.argsort(-scores, kind="stable")] = np.arange(len(scores))
    return ranks


def minmax(scores: np.ndarray) -> np.ndarray:
    return (scores - scores.min()) / (scores.max() - scores.min() + 1e-12)


def auc(pos: list[float], neg: list[float]) -> float:
    """Mann-Whitney: the chance a relevant question's top score beats an irrelevant one's (ties count half)."""
    p, n = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return round(float((p > n).mean() + 0.5 * (p == n).mean()), 4)


def install_mib(name: str) -> dict[str, float]:
    """MiB on disk of a distribution alone and with everything it requires, transitively (extras left out)."""
    seen: dict[str, float] = {}

    def walk(dist_name: str) -> None:
        try:
            dist = md.distribution(dist_name)
        except md.PackageNotFoundError:  # a requirement for other Pythons (an environment marker)
            return
        files = [f.locate() for f in dist.files or []]
        seen[dist.metadata["Name"].lower()] = sum(f.stat().st_size for f in files if f.exists()) / 2**20
        for req in dist.requires or []:
            dep = re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower()
            if "extra ==" not in req and dep not in seen:
                walk(dep)

    walk(name)
    return {"own": round(seen[name.lower()], 2), "with_deps": round(sum(seen.values()), 2)}


def timed(build, query, docs: list[str], queries: list[str]) -> dict[str, float]:
    """Median ms of three index builds over ``docs`` and of each query (tokenize or embed, score, sort)."""
    builds, per_query = [], []
    for _ in range(3):
        start = time.perf_counter()
        index = build(docs)
        builds.append(time.perf_counter() - start)
    for text in queries:
        start = time.perf_counter()
        np.argsort(-query(index, text))
        per_query.append(time.perf_counter() - start)
    return {"build_ms": round(statistics.median(builds) * 1e3, 2), "query_ms": round(statistics.median(per_query) * 1e3, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_data = next(iter(sorted(ROOT.glob(".venv/lib/python*/site-packages/bfcl_eval/data"))), None)
    parser.add_argument("--data-dir", type=Path, default=default_data, help="bfcl_eval's data folder")
    parser.add_argument("--sizes", default="10,100,1000,all")
    parser.add_argument("--hybrid-bm25", default="bm25s/own", help="the BM25 method the hybrids fuse")
    parser.add_argument("--json", type=Path, help="write the record here")
    args = parser.parse_args()
    rows = {c: read_jsonl(args.data_dir / f"BFCL_v4_{c}.json") for c in POOL_CATEGORIES + IRRELEVANT}
    truth = {r["id"]: next(iter(r["ground_truth"][0])) for c in RELEVANT
             for r in read_jsonl(args.data_dir / "possible_answer" / f"BFCL_v4_{c}.json")}

    keys: dict[tuple[str, str], int] = {}  # every function (pool and own lists), by name and description
    funcs: dict[int, dict] = {}
    for row in (row for c in POOL_CATEGORIES + IRRELEVANT for row in rows[c]):
        row["ids"] = [keys.setdefault((fn["name"], fn.get("description", "")), len(keys)) for fn in row["function"]]
        funcs.update((i, fn) for i, fn in zip(row["ids"], row["function"], strict=True) if i not in funcs)
    union = sorted({i for c in POOL_CATEGORIES for row in rows[c] for i in row["ids"]})
    relevant = [(r["id"], query_text(r), r["ids"]) for c in RELEVANT for r in rows[c]]
    irrelevant = [(r["id"], query_text(r), r["ids"]) for c in IRRELEVANT for r in rows[c]]
    right = {qid: next(i for i in ids if funcs[i]["name"] == truth[qid]) for qid, _, ids in relevant}
    sizes = [len(union) if s == "all" else int(s) for s in args.sizes.split(",")]
    print(f"pool: {len(union)} distinct functions ({len({funcs[i]['name'] for i in union})} names); "
          f"{len(relevant)} relevant and {len(irrelevant)} irrelevant questions", file=sys.stderr)

    def pool(qid: str, size: int, answer: int | None) -> list[int]:
        """``size`` functions of the union, shuffled: ``answer`` (if any) and random others not of its name."""
        rng = random.Random(f"0:{size}:{qid}")
        others = [i for i in union if answer is None or funcs[i]["name"] != funcs[answer]["name"]]
        ids = rng.sample(others, min(size - (answer is not None), len(others))) + ([] if answer is None else [answer])
        rng.shuffle(ids)
        return ids

    texts = [function_text(funcs[i]) for i in range(len(funcs))]
    queries = [q for _, q, _ in relevant + irrelevant]
    doc_toks = {name: tok(texts) for name, tok in TOKENIZERS.items()}
    doc_sets = {name: [set(d) for d in docs] for name, docs in doc_toks.items()}
    query_toks = {name: dict(zip(queries, tok(queries), strict=True)) for name, tok in TOKENIZERS.items()}
    wl = WordLlama.load(cache_dir=pathlib.Path(wordllama.__file__).parent, disable_download=True)
    doc_emb, query_emb = wl.embed(texts, norm=True), dict(zip(queries, wl.embed(queries, norm=True), strict=True))

    def score_all(ids: list[int], query: str) -> dict[str, np.ndarray]:
        out = {f"bm25s/{t}": bm25s_query(bm25s_index([doc_toks[t][i] for i in ids]), query_toks[t][query]) for t in TOKENIZERS}
        out["rank-bm25/own"] = BM25Okapi([doc_toks["own"][i] for i in ids]).get_scores(query_toks["own"][query])
        out["wordllama"] = doc_emb[ids] @ query_emb[query]
        bm, cos = out[args.hybrid_bm25], out["wordllama"]
        out["hybrid-rrf"] = 1 / (60 + ordinal(bm)) + 1 / (60 + ordinal(cos))
        out["hybrid-minmax"] = minmax(bm) + minmax(cos)
        return out

    def top_signals(ids: list[int], query: str) -> dict[str, float]:
        scores = score_all(ids, query)
        signals = {m: float(s.max()) for m, s in scores.items() if not m.startswith("hybrid")}
        for tok in TOKENIZERS:
            top, qt = signals[f"bm25s/{tok}"], query_toks[tok][query]
            signals[f"bm25s/{tok} / idf sum"] = top / max(idf_sum([doc_sets[tok][i] for i in ids], qt), 1e-9)
            signals[f"bm25s/{tok} / terms"] = top / max(len(qt), 1)
        # Lucene BM25 gives a term at most (k1 + 1) = 2.5 times its idf: this puts the two on about the same scale.
        signals["wordllama + hybrid-bm25 / idf sum / 2.5"] = signals["wordllama"] + signals[f"{args.hybrid_bm25} / idf sum"] / 2.5
        return signals

    recall: dict[str, dict[str, dict[str, float]]] = {}
    agree = {}
    for size in sizes:
        hits: dict[str, list[list[bool]]] = {}
        same_top = 0
        for qid, query, _ in relevant:
            ids = pool(qid, size, right[qid])
            scores, at = score_all(ids, query), ids.index(right[qid])
            for method, s in scores.items():
                rank = int((np.delete(s, at) >= s[at]).sum())
                hits.setdefault(method, []).append([rank < k for k in KS])
            same_top += int(np.argmax(scores["bm25s/own"]) == np.argmax(scores["rank-bm25/own"]))
        label = "all" if size == len(union) else str(size)
        agree[label] = round(same_top / len(relevant), 4)
        for method, h in hits.items():
            means = np.mean(h, axis=0).round(4).tolist()
            recall.setdefault(method, {})[label] = dict(zip((f"r@{k}" for k in KS), means, strict=True))

    aucs: dict[str, dict[str, float]] = {}
    for setting in ("pool 1000", "own functions"):
        tops: dict[str, dict[str, list[float]]] = {}
        for kind, questions in (("relevant", relevant), ("irrelevant", irrelevant)):
            for qid, query, own in questions:
                ids = own if setting == "own functions" else pool(qid, 1000, right.get(qid))
                for signal, value in (top_signals(ids, query) if ids else {}).items():  # 4 questions offer no function
                    tops.setdefault(signal, {}).setdefault(kind, []).append(value)
        aucs[setting] = {signal: auc(v["relevant"], v["irrelevant"]) for signal, v in tops.items()}

    docs, sample = [texts[i] for i in pool("timing", 1000, None)], random.Random(0).sample(queries, 200)
    engines = {f"bm25s/{t}": (lambda d, tok=tok: bm25s_index(tok(d)), lambda ix, q, tok=tok: bm25s_query(ix, tok([q])[0]))
               for t, tok in TOKENIZERS.items()}
    engines["rank-bm25/own"] = (lambda d: BM25Okapi(own_tokens(d)), lambda ix, q: ix.get_scores(own_tokens([q])[0]))
    engines["wordllama"] = (lambda d: wl.embed(d, norm=True), lambda ix, q: ix @ wl.embed([q], norm=True)[0])
    timings = {method: timed(build, query, docs, sample) for method, (build, query) in engines.items()}
    libs = {lib: install_mib(lib) for lib in ("bm25s", "rank-bm25", "PyStemmer", "wordllama", "numpy")}

    print(f"\nrecall@{'/'.join(map(str, KS))}  (pool of {len(union)}; hybrids fuse {args.hybrid_bm25} + wordllama)")
    print(f"{'method':22}" + "".join(f"{label:>32}" for label in next(iter(recall.values()))))
    for method, per_size in recall.items():
        print(f"{method:22}" + "".join(f"{' '.join(f'{v:.3f}' for v in r.values()):>32}" for r in per_size.values()))
    print(f"rank-bm25 vs bm25s/own, same top-1: {agree}\n\n{'pool 1000 timing':22}{'build ms':>10}{'query ms':>10}")
    for method, t in timings.items():
        print(f"{method:22}{t['build_ms']:>10}{t['query_ms']:>10}")
    print(f"\n{'top-score AUC':40}" + "".join(f"{s:>16}" for s in aucs))
    for signal in aucs["pool 1000"]:
        print(f"{signal:40}" + "".join(f"{aucs[s][signal]:>16}" for s in aucs))
    print("\ninstall MiB: " + ", ".join(f"{k} {v['own']} ({v['with_deps']} with deps)" for k, v in libs.items()))

    if args.json:
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), platform.processor())
        git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        record = {
            "command": " ".join([sys.executable, *sys.argv]),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "machine": {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
                        "python": platform.python_version()},
            "git": git.stdout.strip(), "versions": {lib: md.version(lib) for lib in libs},
            "pool_functions": len(union), "pool_names": len({funcs[i]["name"] for i in union}),
            "questions": {"relevant": len(relevant), "irrelevant": len(irrelevant)}, "hybrid_bm25": args.hybrid_bm25,
            "recall": recall, "rank_bm25_same_top1_as_bm25s_own": agree, "timings_pool_1000": timings,
            "auc_top_score": aucs, "install_mib": libs,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
