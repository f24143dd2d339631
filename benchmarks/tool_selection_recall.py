"""Does the engine offer every tool a question needs? Tool selection's recall, with no model run.

Each question goes through the engine's own selection (``make_plan`` on a scripted backend, default settings:
tool budget, selector) with a pool of real functions, and counts as served when every function its answer
needs is among the tools offered. Recorded per selector (``meaning``, the default, and ``bm25``):

- BFCL v4's simple_python, multiple, parallel, parallel_multiple, live_simple, live_multiple and
  live_parallel_multiple questions (``--per-category`` of each, seeded), among 100 and 1,000 pooled BFCL
  functions (the question's own, then others drawn, seeded): recall and the tools offered per call. The
  questions are split in halves by a hash of their id; the weights were tuned on the ``tune`` half only.
- benchmarks/data/paraphrase_multilingual.json: paraphrased questions in six languages among every pooled BFCL
  function; a fitting tool offered. Its ``held_out`` half was not read while tuning.
- Selection time per call (warm) and index build time for a new tool set of 1,000 and 10,000 tools (vectors
  not cached: a new store), and again with the vectors on disk; the embedder's one-time load in a process apart.

Usage::

    .venv/bin/python benchmarks/tool_selection_recall.py [--per-category 60] [--no-timing | --only-timing]
        [--json docs/benchmarks/tools/selection_recall.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evals"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from record import run_facts, write_record  # noqa: E402

from hammer_evals.bfcl.bfcl import load_category, to_tool_spec  # noqa: E402
from hammer_plugins import HammerEngine, Message, ScriptedBackend  # noqa: E402
from hammer_plugins.engine.planning import make_plan  # noqa: E402
from hammer_plugins.engine.request import EngineRequest  # noqa: E402
from hammer_plugins.tools import to_tool  # noqa: E402
from hammer_plugins.tools.embedding import ToolVectors, VectorStore, default_embedder  # noqa: E402
from hammer_plugins.tools.meaning import MeaningSelector  # noqa: E402
from hammer_plugins.tools.selector import SelectionQuery  # noqa: E402

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple",
              "live_parallel_multiple")
SELECTORS = ("meaning", "bm25")
DATA = ROOT / "benchmarks" / "data" / "paraphrase_multilingual.json"


def half(entry_id: str) -> str:
    return "tune" if int(hashlib.sha256(entry_id.encode()).hexdigest(), 16) % 2 == 0 else "held_out"


def every_function() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for category in CATEGORIES:
        for entry in load_category(category)[0]:
            for function in entry.functions:
                found.setdefault(function["name"], function)
    return found


def offered(engine: HammerEngine, messages: list[Message], tools: list[dict[str, Any]]) -> tuple[str, ...]:
    plan = make_plan(engine, EngineRequest.of(messages, tools), fit=False)
    return plan.offered if plan.offered is not None else tuple(t["name"] for t in tools)


def bfcl_rows(engines: dict[str, HammerEngine], functions: dict[str, dict[str, Any]], per_category: int,
              sizes: list[int]) -> list[dict[str, Any]]:
    names = list(functions)
    rows = []
    for category in CATEGORIES:
        for entry in load_category(category, per_category, seed=7)[0]:
            needed = {next(iter(g)) for g in entry.ground_truth}
            own = list(dict.fromkeys(f["name"] for f in entry.functions))
            messages = [Message(role=m["role"], content=m["content"]) for m in entry.question]
            for size in sizes:
                rng = random.Random(f"0:{entry.id}:{size}")
                rest = [n for n in names if n not in set(own)]
                pool = own + rng.sample(rest, size - len(own))
                rng.shuffle(pool)
                tools = [to_tool_spec(functions[n]) for n in pool]
                for label, engine in engines.items():
                    got = offered(engine, messages, tools)
                    rows.append({"id": entry.id, "category": category, "half": half(entry.id), "size": size,
                                 "selector": label, "served": needed <= set(got), "offered": len(got)})
        print(category, flush=True)
    return rows


def paraphrase_rows(engines: dict[str, HammerEngine], functions: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    tools = [to_tool_spec(f) for f in functions.values()]
    rows = []
    for question in data["questions"]:
        for label, engine in engines.items():
            got = offered(engine, [Message.user(question["question"])], tools)
            rows.append({"id": question["id"], "language": question["language"], "half": question["split"],
                         "selector": label, "served": bool(set(question["fits"]) & set(got)), "offered": len(got)})
    return rows


def share(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    chosen = [r for r in rows if all(r[k] == v for k, v in match.items())]
    if not chosen:
        return None
    return {"questions": len(chosen), "served": round(sum(r["served"] for r in chosen) / len(chosen), 4),
            "mean_offered": round(statistics.fmean(r["offered"] for r in chosen), 2)}


def timing(functions: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The embedder's load, then index build (new vectors, then vectors on disk) and warm selection time, for 1,000
    and 10,000 tools."""
    base = list(functions.values())
    # The embedder loads once per process (its tokenizer and weights): timed apart, so that each size's index time
    # is a new tool set's own. A process's first call with a new tool set takes both.
    started = time.perf_counter()
    default_embedder().query("warm up")
    out: dict[str, Any] = {"embedder_load_s": round(time.perf_counter() - started, 2)}
    print(out, flush=True)
    for size in (1000, 10000):
        specs = [dict(to_tool_spec(base[i % len(base)]), name=f"{base[i % len(base)]['name']}_{i}",
                      description=f"{base[i % len(base)].get('description', '')} (variant {i})") for i in range(size)]
        tools = tuple(to_tool(s) for s in specs)  # the engine passes its bound tuple
        store = VectorStore(Path(tempfile.mkdtemp()) / "v" / "vectors.sqlite3")
        cold = MeaningSelector(store=store)
        started = time.perf_counter()
        cold.select(SelectionQuery("What is the weather in Paris?"), tools)
        built = time.perf_counter() - started
        from hammer_plugins.tools import meaning

        meaning._RANKINGS._items.clear()  # a new process: the vectors come from the disk store
        again = MeaningSelector(store=store)
        again._vectors = ToolVectors(default_embedder(), store)
        started = time.perf_counter()
        again.select(SelectionQuery("What is the weather in Paris?"), tools)
        from_disk = time.perf_counter() - started
        times = []
        for question in ("How hot is it in Rome?", "上海明天会下雨吗？", "Send an email to Bob and book a table."):
            started = time.perf_counter()
            again.select(SelectionQuery(question), tools)
            times.append(time.perf_counter() - started)
        out[str(size)] = {"index_new_s": round(built, 2), "index_from_disk_s": round(from_disk, 2),
                          "select_warm_ms": round(1000 * statistics.median(times), 1)}
        print(size, out[str(size)], flush=True)
        if size >= 10000 and built > 600:
            break
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-category", type=int, default=60)
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--only-timing", action="store_true", help="the timings alone (a quiet machine's figures)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    functions = every_function()
    if args.only_timing:
        write_record(args.json, {**run_facts("benchmarks/tool_selection_recall.py"), "timing": timing(functions)})
        return 0
    engines = {label: HammerEngine(backend=ScriptedBackend([]), tool_selector=label) for label in SELECTORS}
    sizes = [int(s) for s in args.sizes.split(",")]
    bfcl = bfcl_rows(engines, functions, args.per_category, sizes)
    para = paraphrase_rows(engines, functions)
    summary: dict[str, Any] = {"bfcl": {}, "paraphrase": {}}
    for label in SELECTORS:
        for size in sizes:
            for part in ("tune", "held_out", None):
                key = f"{label} pool{size} {part or 'all'}"
                match = {"selector": label, "size": size, **({"half": part} if part else {})}
                summary["bfcl"][key] = {"all": share(bfcl, **match),
                                        **{c: share(bfcl, category=c, **match) for c in CATEGORIES}}
        for part in ("tune", "held_out"):
            languages = sorted({r["language"] for r in para})
            summary["paraphrase"][f"{label} {part}"] = {
                "all": share(para, selector=label, half=part),
                **{lang: share(para, selector=label, half=part, language=lang) for lang in languages}}
    for section in summary.values():
        for key, value in section.items():
            print(f"{key:28s} {json.dumps(value['all'])}")
    timings = {} if args.no_timing else timing(functions)
    write_record(args.json, {**run_facts("benchmarks/tool_selection_recall.py"), "pool_functions": len(functions),
                             "per_category": args.per_category, "tool_budget": engines["meaning"].tool_budget,
                             "summary": summary, "timing": timings, "rows": {"bfcl": bfcl, "paraphrase": para}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
