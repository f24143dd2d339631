"""BFCL questions asked with pooled tool sets (10, 100, 1,000 real BFCL functions) against their own tools alone.

An agent hands the model every tool it has; BFCL gives each question its own one to four. Here each
question is asked twice or more in the same process, on the same loaded model, with default engine
settings: once with its own functions (BFCL's setting), then with a pool that holds its functions
among other real BFCL functions (from simple_python, multiple, parallel, parallel_multiple,
live_simple and live_multiple, distinct by name, seeded). Each answer is scored by bfcl-eval's AST
checker against the question's own functions (a call to any other tool is wrong). Recorded per
setting: right answers, the median and mean seconds per call, calls that failed for the context
window, and the selector's recall (the right function among the tools offered, read from
``HammerResponse.offered_tools``).

Usage::

    .venv/bin/python benchmarks/tool_selection.py [--sizes 10,100,1000] [--simple 24] [--multiple 12]
        [--variant tool_budget=1536,BEST_OF_QUESTION=8,MIN_SHARE_OF_BEST=0.5] [--json docs/benchmarks/tools/selection.json]

``--variant NAME=VALUE[,NAME=VALUE...]`` sets one or more of ``hammer_plugins.tools.meaning``'s constants
(``BEST_OF_QUESTION``, ``BEST_OF_PART``, ``MEANING_WEIGHT``, ``MIN_SHARE_OF_BEST``), ``tool_budget`` or
``tool_selector`` (``bm25``) for the pooled runs, to compare settings side by side (repeatable: each variant is its
own pooled run; ``default`` is the engine's own settings). ``--parallel-multiple N`` adds questions whose answer
calls two to four different functions.

``--seed`` draws the questions (1, the default, is the sample the first records used); ``--avoid SEED:N`` leaves out
every question that seed draws with ``N`` a category, so a fresh sample shares no question with an earlier one
(``--avoid 1:24 --avoid 7:60``: the earlier end-to-end samples and the recall benchmarks' tune and held-out halves).
``--stop-after SECONDS`` ends the run after the question that passes that time, and ``--resume`` goes on from the
record ``--json`` holds (written after each question), so a long run can go in turns of a shared model lock.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "evals"))

from record import run_facts, write_record  # noqa: E402

from hammer_evals.bfcl.bfcl import BfclEntry, load_category, score, to_bfcl_output, to_tool_spec  # noqa: E402
from hammer_plugins import HammerEngine, Message  # noqa: E402
from hammer_plugins.engine.planning import make_plan  # noqa: E402
from hammer_plugins.engine.request import EngineRequest  # noqa: E402
from hammer_plugins.engine.tool_selection import ConversationOffers  # noqa: E402
from hammer_plugins.tools import meaning  # noqa: E402
from hammer_plugins.tools.meaning import as_selector  # noqa: E402
from hammer_plugins.values.errors import ContextWindowExceededError  # noqa: E402

POOL_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple")
SETTABLE = ("BEST_OF_QUESTION", "BEST_OF_PART", "MEANING_WEIGHT", "MIN_SHARE_OF_BEST")


def questions(simple: int, multiple: int, parallel_multiple: int = 0, seed: int = 1,
              avoid: tuple[tuple[int, int], ...] = ()) -> list[BfclEntry]:
    """``simple`` simple_python, ``multiple`` multiple and ``parallel_multiple`` questions drawn with ``seed``, none of
    those each ``(seed, n)`` of ``avoid`` draws (``n`` a category). With nothing to avoid, ``load_category``'s own draw."""
    chosen: list[BfclEntry] = []
    for category, count in (("simple_python", simple), ("multiple", multiple), ("parallel_multiple", parallel_multiple)):
        if not count:
            continue
        if not avoid:
            chosen += load_category(category, count, seed=seed)[0]
            continue
        used = {e.id for old_seed, n in avoid for e in load_category(category, n, seed=old_seed)[0]}
        left = [e for e in load_category(category)[0] if e.id not in used]
        if count > len(left):
            raise SystemExit(f"{category}: {count} questions asked, {len(left)} left after --avoid. Fix: ask fewer.")
        keep = set(random.Random(f"{seed}:{category}").sample(range(len(left)), count))
        chosen += [e for i, e in enumerate(left) if i in keep]
    return chosen


def all_functions() -> dict[str, dict[str, Any]]:
    """Every distinct BFCL function of the pool categories, by name (the first description of a name)."""
    found: dict[str, dict[str, Any]] = {}
    for category in POOL_CATEGORIES:
        for entry in load_category(category)[0]:
            for function in entry.functions:
                found.setdefault(function["name"], function)
    return found


def pool_for(entry: BfclEntry, others: list[dict[str, Any]], size: int, seed: int) -> list[dict[str, Any]]:
    """``size`` functions: the question's own, then others drawn (seeded), in a shuffled order."""
    own = {f["name"] for f in entry.functions}
    rng = random.Random(f"{seed}:{entry.id}:{size}")
    rest = [f for f in others if f["name"] not in own]
    pool = list(entry.functions) + rng.sample(rest, max(0, size - len(entry.functions)))
    rng.shuffle(pool)
    return pool


def ask(engine: HammerEngine, entry: BfclEntry, functions: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    engine.backend.llama.reset()  # type: ignore[attr-defined]
    # A new conversation each call: the engine keeps a conversation's offered tools while they hold what a later
    # turn needs, and the same question over the same pool is one conversation to it, so the setting asked first
    # would decide what every later setting offers.
    engine.offer_memory = ConversationOffers()
    messages = [Message(role=m["role"], content=m["content"]) for m in entry.question]
    tools = [to_tool_spec(f) for f in functions]
    right = {next(iter(g)) for g in entry.ground_truth}
    engine.tool_selector = as_selector(options.pop("tool_selector", "meaning"))
    started = time.perf_counter()
    try:
        response = engine.generate(messages, tools, **options)
    except ContextWindowExceededError as exc:
        return {"id": entry.id, "correct": False, "context_error": True, "seconds": time.perf_counter() - started,
                "prompt_tokens": exc.prompt_tokens}
    seconds = time.perf_counter() - started
    output = to_bfcl_output([(c.name, c.arguments) for c in response.tool_calls])
    verdict = score(entry, output)
    offered = response.offered_tools
    return {"id": entry.id, "correct": verdict.correct, "context_error": False, "seconds": seconds,
            "prompt_tokens": response.usage.prompt_tokens, "calls": [c.name for c in response.tool_calls],
            "offered": None if offered is None else len(offered),
            "recall": None if offered is None else right <= set(offered)}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = [r["seconds"] for r in rows if not r["context_error"]]
    recall = [r["recall"] for r in rows if r.get("recall") is not None]
    offered = [r["offered"] for r in rows if r.get("offered") is not None]
    return {"questions": len(rows), "correct": sum(r["correct"] for r in rows), "right_offered": sum(recall),
            "context_errors": sum(r["context_error"] for r in rows),
            "median_s": statistics.median(seconds) if seconds else None,
            "mean_s": statistics.fmean(seconds) if seconds else None,
            "median_prompt_tokens": statistics.median(r["prompt_tokens"] for r in rows),
            "selector_recall": (sum(recall) / len(recall)) if recall else None,
            "narrowed": len(recall), "median_offered": statistics.median(offered) if offered else None,
            "mean_offered": statistics.fmean(offered) if offered else None}


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """``NAME=VALUE[,NAME=VALUE...]`` as its label and its settings; a name not settable, a repeated name or a value
    that is not a number (``tool_selector`` aside) is an error that says which."""
    settings: dict[str, Any] = {}
    if text == "default":
        return text, settings
    for part in text.split(","):
        name, equals, value = part.strip().partition("=")
        if name == "tool_selector" and value:
            settings[name] = value
            continue
        if not equals or (name != "tool_budget" and name not in SETTABLE) or name in settings:
            raise ValueError(f"--variant {text!r}: {part!r} is not NAME=VALUE with a new NAME of tool_budget, "
                             f"tool_selector or {', '.join(SETTABLE)}. Fix: e.g. tool_budget=1536,BEST_OF_QUESTION=8")
        try:
            settings[name] = float(value) if "." in value else int(value)
        except ValueError:
            raise ValueError(f"--variant {text!r}: {name} needs a number, got {value!r}") from None
    return text, settings


def parse_avoid(text: str) -> tuple[int, int]:
    """``SEED:N`` as two whole numbers."""
    seed, _, count = text.partition(":")
    try:
        return int(seed), int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--avoid {text!r}: not SEED:N (e.g. 1:24)") from None


def index_pool(engine: HammerEngine, entry: BfclEntry, pool: list[dict[str, Any]]) -> None:
    """Plan the question over ``pool`` once, untimed, so that no setting's time holds the pool's indexing (an agent
    indexes its tool set once, not every call); without this the setting asked first paid it alone."""
    messages = [Message(role=m["role"], content=m["content"]) for m in entry.question]
    engine.tool_selector = as_selector("meaning")
    make_plan(engine, EngineRequest.of(messages, [to_tool_spec(f) for f in pool]), fit=False)


def ask_all(engine: HammerEngine, entry: BfclEntry, others: list[dict[str, Any]], sizes: list[int],
            variants: list[tuple[str, dict[str, Any]]], rows: dict[str, list[dict[str, Any]]]) -> None:
    """One question with its own functions, then in each pool under each variant; the rows join ``rows``."""
    defaults = {name: getattr(meaning, name) for name in SETTABLE}
    rows.setdefault("own", []).append(ask(engine, entry, entry.functions))
    for size in sizes:
        pool = pool_for(entry, others, size, seed=0)
        index_pool(engine, entry, pool)
        for label, settings in variants:
            options = {name: value for name, value in settings.items() if name in ("tool_budget", "tool_selector")}
            for name, value in settings.items():
                if name in SETTABLE:
                    setattr(meaning, name, value)
            key = f"pool{size}" + ("" if label == "default" else f" {label}")
            try:
                rows.setdefault(key, []).append({**ask(engine, entry, pool, **options), "size": size})
            finally:
                for name, value in defaults.items():
                    setattr(meaning, name, value)


def summaries(entries: list[BfclEntry], rows: dict[str, list[dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each setting's summary (with its median time over the own tools' median), and each split into questions whose
    answer is one call (single) and several (multi)."""
    results: dict[str, Any] = {}
    own = summary(rows["own"])
    for key, mine in rows.items():
        results[key] = summary(mine)
        if key != "own" and own["median_s"] and results[key]["median_s"]:
            results[key]["median_over_own"] = results[key]["median_s"] / own["median_s"]
    by_kind: dict[str, Any] = {}
    for key, mine in rows.items():
        for kind, ids in (("single", {e.id for e in entries if len(e.ground_truth) == 1}),
                          ("multi", {e.id for e in entries if len(e.ground_truth) > 1})):
            chosen = [r for r in mine if r["id"] in ids]
            if chosen:
                by_kind[f"{key} {kind}"] = summary(chosen)
    for kind in ("single", "multi"):
        own_kind = by_kind.get(f"own {kind}")
        for key in rows:
            mine = by_kind.get(f"{key} {kind}")
            if key != "own" and mine and own_kind and own_kind["median_s"] and mine["median_s"]:
                mine["median_over_own"] = mine["median_s"] / own_kind["median_s"]
    return results, by_kind


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--simple", type=int, default=24)
    parser.add_argument("--multiple", type=int, default=12)
    parser.add_argument("--parallel-multiple", type=int, default=0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--avoid", type=parse_avoid, action="append", default=[])
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--stop-after", type=float, help="seconds: end after the question that passes them")
    parser.add_argument("--resume", action="store_true", help="go on from the record --json holds")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    try:
        variants = [parse_variant(v) for v in args.variant] or [("default", {})]
    except ValueError as exc:
        parser.error(str(exc))
    if args.resume and args.json is None:
        parser.error("--resume needs --json (the record to go on from)")
    sizes = [int(size) for size in args.sizes.split(",")]
    entries = questions(args.simple, args.multiple, args.parallel_multiple, args.seed, tuple(args.avoid))
    plan = {"ids": [e.id for e in entries], "sizes": sizes, "variants": [label for label, _ in variants]}
    rows: dict[str, list[dict[str, Any]]] = {"own": []}
    runs: list[dict[str, Any]] = []
    if args.resume and args.json.exists():
        earlier = json.loads(args.json.read_text())
        if earlier.get("plan") != plan:
            parser.error(f"--resume: {args.json} holds another run (questions, sizes or variants differ). "
                         "Fix: the same options as that run, or another --json")
        rows, runs = earlier["rows"], earlier.get("runs", [])
    done = {row["id"] for row in rows["own"]}
    if done >= set(plan["ids"]):
        print(f"{args.json}: every question done; nothing to resume", flush=True)
        return 0
    functions = all_functions()
    others = list(functions.values())
    # Each call starts from the same cold context (no prefix kept from the call before, none on disk), so
    # no setting gains from the order the settings run in: the time is a first call's for every one.
    engine = HammerEngine(prefix_cache=False).load()
    engine.generate([Message.user("warm up")], [to_tool_spec(entries[0].functions[0])])
    defaults = {**{name: getattr(meaning, name) for name in SETTABLE}, "tool_budget": engine.tool_budget}
    runs.append({**run_facts("benchmarks/tool_selection.py"), "questions": 0})
    started = time.perf_counter()
    for entry in entries:
        if entry.id in done:
            continue
        if args.stop_after is not None and time.perf_counter() - started > args.stop_after:
            print(f"stopped after {runs[-1]['questions']} questions; --resume goes on", flush=True)
            break
        ask_all(engine, entry, others, sizes, variants, rows)
        runs[-1]["questions"] += 1
        print(entry.id, json.dumps({k: (v[-1]["correct"], round(v[-1]["seconds"], 2)) for k, v in rows.items()}),
              flush=True)
        results, by_kind = summaries(entries, rows)
        write_record(args.json, {**run_facts("benchmarks/tool_selection.py"), "model": engine.model_name,
                                 "complete": len(rows["own"]) == len(entries), "runs": runs, "plan": plan,
                                 "by_kind": by_kind, "pool_functions": len(functions), "defaults": defaults,
                                 "summary": results, "rows": rows})
    results, by_kind = summaries(entries, rows)
    for key, value in {**results, **by_kind}.items():
        print(f"{key:28s} {json.dumps(value)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
