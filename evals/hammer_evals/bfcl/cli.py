"""``hammer bench``: accuracy, robustness and speed runs, and the report over their results.

Examples::

    hammer bench accuracy --model default --sample 5 --out results/default
    hammer bench robustness --model default --sample 5 --out results/default
    hammer bench speed --model default --repeats 5 --out results/default
    hammer bench report --out results/default
    hammer bench all --model smollm2 --sample 5 --out results/smollm2
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hammer_plugins.engine.settings import add_concurrency_argument

from . import CATEGORIES, MULTI_TURN_CATEGORIES, ROBUSTNESS_CATEGORIES
from .machine import machine_info, resolve_model
from .runners import EXTRA_RUNNERS, RUNNERS


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")


def _command(args: argparse.Namespace) -> str:
    import sys

    return str(getattr(args, "argv_text", "") or " ".join(["hammer", *sys.argv[1:]]))


def cmd_accuracy(args: argparse.Namespace) -> int:
    from .accuracy import excluded_defects, load_entries, run_accuracy, summarize

    label, path = resolve_model(args.model)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    categories = args.categories.split(",") if args.categories else list(CATEGORIES)
    entries, _ = load_entries(categories, args.sample, args.seed)
    records_file = out / "accuracy_records.jsonl"
    records_file.unlink(missing_ok=True)
    started = time.perf_counter()
    machine_before = machine_info()
    _write_json(out / "accuracy_run.json", {"model": label, "model_path": path, "command": _command(args),
                                            "questions": len(entries), "machine_before": machine_before})
    records = run_accuracy(path, args.runners.split(","), entries, max_tokens=args.max_tokens, n_ctx=args.n_ctx,
                           n_threads=args.threads, records_file=records_file, base_url=args.base_url,
                           concurrency=args.concurrency)
    _write_json(out / "accuracy.json", {
        "model": label, "model_path": path, "command": _command(args), "categories": categories,
        "sample_per_category": args.sample, "seed": args.seed, "max_tokens": args.max_tokens, "threads": args.threads,
        "base_url": args.base_url, "concurrency": args.concurrency,
        "questions": len(entries), "excluded_answer_key_defects": excluded_defects(categories),
        "wall_s": round(time.perf_counter() - started, 1), "machine_before": machine_before,
        "machine_after": machine_info(), "summary": summarize(records),
    })
    print(f"wrote {out / 'accuracy.json'}")
    return 0


def cmd_multi_turn(args: argparse.Namespace) -> int:
    from .multi_turn import run_multi_turn, summary_table

    label, path = resolve_model(args.model)
    out = Path(args.out)
    categories = args.categories.split(",") if args.categories else list(MULTI_TURN_CATEGORIES)
    started = time.perf_counter()
    machine_before = machine_info()
    summary = run_multi_turn(path, args.runners.split(","), categories, args.sample, out, max_steps=args.max_steps,
                             max_tokens=args.max_tokens, n_ctx=args.n_ctx, n_threads=args.threads,
                             base_url=args.base_url, concurrency=args.concurrency, skip=args.skip)
    table = summary_table(summary)
    _write_json(out / "multi_turn.json", {
        "model": label, "model_path": path, "command": _command(args), "categories": categories,
        "entries_per_category": args.sample, "skipped_per_category": args.skip, "max_steps": args.max_steps,
        "max_tokens": args.max_tokens,
        "threads": args.threads, "wall_s": round(time.perf_counter() - started, 1),
        "machine_before": machine_before, "machine_after": machine_info(), "summary": summary, "table": table,
    })
    print(table)
    print(f"wrote {out / 'multi_turn.json'}")
    return 0


def cmd_robustness(args: argparse.Namespace) -> int:
    from .robustness import run_robustness

    label, path = resolve_model(args.model)
    out = Path(args.out)
    categories = args.categories.split(",") if args.categories else list(ROBUSTNESS_CATEGORIES)
    started = time.perf_counter()
    machine_before = machine_info()
    result = run_robustness(path, categories, args.sample, args.seed, max_tokens=args.max_tokens, n_ctx=args.n_ctx,
                            n_threads=args.threads, records_file=out / "robustness_records.jsonl")
    _write_json(out / "robustness.json", {
        "model": label, "model_path": path, "command": _command(args), "categories": categories,
        "sample_per_category": args.sample, "seed": args.seed, "wall_s": round(time.perf_counter() - started, 1),
        "machine_before": machine_before, "machine_after": machine_info(), **result,
    })
    print(f"wrote {out / 'robustness.json'}")
    return 0


def cmd_speed(args: argparse.Namespace) -> int:
    from .speed import run_speed

    label, path = resolve_model(args.model)
    out = Path(args.out)
    started = time.perf_counter()
    machine_before = machine_info()
    result = run_speed(path, repeats=args.repeats, n_tools=args.tools, max_tokens=args.max_tokens, n_ctx=args.n_ctx,
                       n_threads=args.threads)
    _write_json(out / "speed.json", {
        "model": label, "model_path": path, "command": _command(args), "wall_s": round(time.perf_counter() - started, 1),
        "machine_before": machine_before, "machine_after": machine_info(), **result,
    })
    print(f"wrote {out / 'speed.json'}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .report import write_report

    path = write_report(Path(args.out))
    print(f"wrote {path}")
    return 0


def cmd_all(args: argparse.Namespace) -> int:
    for step in (cmd_accuracy, cmd_robustness, cmd_speed, cmd_report):
        code = step(args)
        if code:
            return code
    return 0


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="default",
                        help="'default', 'smollm2', a .gguf path, or a preset or GGUF repo once pulled (hammer pull)")
    parser.add_argument("--out", default="bench-results", help="results directory (JSON, Markdown, PNG)")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads, the same for every runner")


def _question_options(parser: argparse.ArgumentParser, *, sample: int | None = 5, seed: bool = True,
                      categories: tuple[str, ...] = CATEGORIES) -> None:
    parser.add_argument("--sample", type=lambda s: None if s == "all" else int(s), default=sample,
                        help="questions per category ('all' for full runs)")
    if seed:  # multi-turn takes each category's first entries: no draw
        parser.add_argument("--seed", type=int, default=0)
    # The default each step really runs: multi-turn's and robustness's are not accuracy's single-turn list.
    parser.add_argument("--categories", default="", help=f"comma-separated; default: {','.join(categories)}")


def _serving_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", help="the ChatHammer runners ask this server (`hammer serve`) instead of "
                                           "loading --model; the other runners still load --model")
    add_concurrency_argument(parser)


def _speed_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repeats", type=int, default=5, help="runs per measurement (medians)")
    parser.add_argument("--tools", type=int, default=20, help="tools in the block")


def add_bench_parser(sub: Any) -> None:
    """Add ``hammer bench`` to the ``hammer`` command's subparsers. Each step lists only the options it reads."""
    bench = sub.add_parser("bench", help="BFCL accuracy side by side, robustness to names, speed; writes a report")
    steps = bench.add_subparsers(dest="bench_command", required=True)
    runners = {"help": f"comma-separated from {','.join(RUNNERS + EXTRA_RUNNERS)}", "default": ",".join(RUNNERS)}
    accuracy = steps.add_parser("accuracy", help="BFCL AST accuracy of ChatHammer and the alternatives on the same "
                                                 "questions")
    _model_options(accuracy)
    _question_options(accuracy)
    _serving_options(accuracy)
    accuracy.add_argument("--runners", **runners)
    accuracy.set_defaults(func=cmd_accuracy)
    robustness = steps.add_parser("robustness", help="BFCL with random and misleading names, masking on and off")
    _model_options(robustness)
    _question_options(robustness, categories=ROBUSTNESS_CATEGORIES)
    robustness.set_defaults(func=cmd_robustness)
    speed = steps.add_parser("speed", help="time to first token cold vs warm, overhead share, peak memory")
    _model_options(speed)
    _speed_options(speed)
    speed.set_defaults(func=cmd_speed)
    report = steps.add_parser("report", help="Markdown summary and PNG charts from the JSON results in --out")
    report.add_argument("--out", default="bench-results", help="results directory (JSON, Markdown, PNG)")
    report.set_defaults(func=cmd_report)
    every = steps.add_parser("all", help="accuracy, robustness, speed, then the report")
    _model_options(every)
    _question_options(every)
    _serving_options(every)
    every.add_argument("--runners", **{**runners, "help": runners["help"] + " (accuracy)"})
    _speed_options(every)
    every.set_defaults(func=cmd_all)
    multi = steps.add_parser("multi-turn", help="BFCL multi-turn through the agent loop, on bfcl-eval's simulators "
                                                "and checker (the first --sample entries of each category)")
    _model_options(multi)
    _question_options(multi, sample=2, seed=False, categories=MULTI_TURN_CATEGORIES)
    _serving_options(multi)
    multi.add_argument("--runners", default="hammer",
                       help="comma-separated from hammer,hammer-mask,hammer-call,hammer-ask,chatllamacpp")
    multi.add_argument("--max-steps", type=int, default=20, help="steps per turn before the agent is stopped "
                                                                 "(bfcl-eval's own limit: 20)")
    multi.add_argument("--skip", type=int, default=0, help="leave out the first N entries of each category "
                                                           "(continue a sample in another --out)")
    multi.set_defaults(func=cmd_multi_turn)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``hammer bench ...`` without the rest of the ``hammer`` command (used by benchmarks/ scripts)."""
    import sys

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="hammer")
    add_bench_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", *argv])
    args.argv_text = "hammer bench " + " ".join(argv)
    return int(args.func(args))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
