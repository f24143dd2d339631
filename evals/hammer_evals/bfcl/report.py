"""The Markdown summary and PNG charts of a results directory (``accuracy.json``, ``robustness.json``,
``speed.json``; an interrupted accuracy run is summarized from ``accuracy_records.jsonl`` and marked partial).

Example:
    >>> pct(0.5), pct(None)
    ('50.0%', '-')
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from . import CATEGORIES


def pct(value: float | None) -> str:
    """A fraction as a percentage, ``-`` when undefined."""
    return "-" if value is None else f"{100 * value:.1f}%"


def _load(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def load_accuracy(out: Path) -> dict[str, Any] | None:
    """``accuracy.json``, or a partial result rebuilt from the records of an interrupted run."""
    from .accuracy import summarize

    data = _load(out / "accuracy.json")
    if data is not None:
        return data
    records_file = out / "accuracy_records.jsonl"
    if not records_file.is_file():
        return None
    records = [json.loads(line) for line in records_file.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not records:
        return None
    started = _load(out / "accuracy_run.json") or {}
    return {**started, "partial": True, "summary": summarize(records), "questions": len({r["id"] for r in records})}


def accuracy_table(data: dict[str, Any]) -> str:
    """One row per runner: accuracy per category, overall AST, irrelevance, malformed share, latency."""
    summary: dict[str, Any] = data["summary"]
    categories = [c for c in CATEGORIES if any(c in s["per_category"] for s in summary.values())]
    head = ["runner", *categories, "overall AST", "irrelevance", "malformed", "median latency"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for runner, s in summary.items():
        cells = []
        for category in categories:
            cell = s["per_category"].get(category)
            cells.append(f"{cell['correct']}/{cell['n']}" if cell else "-")
        lines.append(f"| {runner} | " + " | ".join(cells) + f" | {pct(s['overall_ast'])} | {pct(s['irrelevance'])} | "
                     f"{pct(s['malformed_share'])} | {s['median_latency_s']:.1f} s |")
    return "\n".join(lines)


def robustness_table(data: dict[str, Any]) -> str:
    """Accuracy per name variant, masking off and on."""
    variants = ["original", "random", "misleading"]
    lines = ["| ChatHammer, constrained | " + " | ".join(f"{v} names" for v in variants) + " |", "|---|---|---|---|"]
    for masking, row in data["summary"].items():
        cells = [f"{row[v]['correct']}/{row[v]['n']}" if v in row else "-" for v in variants]
        lines.append(f"| {masking} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def speed_table(data: dict[str, Any]) -> str:
    """Medians of the speed run."""
    m = data["median"]
    iso = data.get("isolated_overhead_s", {})

    def sec(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f} s"

    rows = [
        ("tools in the block", str(data["n_tools"])), ("runs (medians over)", str(data["repeats"])),
        ("cold time to first token", sec(m["cold_ttft_s"])), ("warm time to first token", sec(m["warm_ttft_s"])),
        ("warm speed-up (cold TTFT / warm TTFT)", "-" if m["ttft_speedup"] is None else f"{m['ttft_speedup']:.1f}x"),
        ("cold total", sec(m["cold_total_s"])), ("warm total", sec(m["warm_total_s"])),
        ("prompt tokens cold / warm / warm cached", f"{m['cold_prompt_tokens']} / {m['warm_prompt_tokens']} / "
                                                   f"{m['warm_cached_prompt_tokens']}"),
        ("our overhead per call (engine_total - model total)", sec(m["overhead_s"])),
        ("overhead share of end-to-end", "-" if m["overhead_share"] is None else f"{100 * m['overhead_share']:.3f}%"),
        *[(f"new tool set, isolated: {k.removesuffix('_s').replace('_', ' ')}", f"{v * 1000:.3f} ms") for k, v in iso.items()],
        ("model load", sec(data.get("load_s"))), ("peak RSS", f"{data['peak_rss_mib']} MiB"),
    ]
    return "\n".join(["| measure | value |", "|---|---|", *[f"| {a} | {b} |" for a, b in rows]])


def charts(out: Path, accuracy: dict[str, Any] | None, robustness: dict[str, Any] | None,
           speed: dict[str, Any] | None) -> list[str]:
    """PNG charts (matplotlib, Agg); returns the file names written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[str] = []
    if accuracy:
        summary = accuracy["summary"]
        runners = list(summary)
        labels = [r.replace(" (", "\n(").replace(", ", ",\n").replace(" + ", "\n+ ") for r in runners]
        metrics = [("overall AST", "overall_ast"), ("irrelevance", "irrelevance"), ("malformed", "malformed_share")]
        fig, ax = plt.subplots(figsize=(10, 4.5))
        width = 0.8 / len(metrics)
        for i, (label, key) in enumerate(metrics):
            values = [100 * (summary[r][key] or 0) for r in runners]
            ax.bar([x + i * width for x in range(len(runners))], values, width, label=label)
        ax.set_xticks([x + width for x in range(len(runners))], labels, fontsize=7)
        ax.set_ylabel("%")
        ax.set_ylim(0, 105)
        ax.set_title(f"BFCL accuracy, {accuracy.get('model', '')} ({accuracy.get('questions', '?')} questions)", fontsize=9)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "accuracy.png", dpi=110)
        plt.close(fig)
        written.append("accuracy.png")
        fig, ax = plt.subplots(figsize=(10, 3.5))
        ax.bar(range(len(runners)), [summary[r]["median_latency_s"] for r in runners], color="tab:gray")
        ax.set_xticks(range(len(runners)), labels, fontsize=7)
        ax.set_ylabel("median latency per question (s)")
        ax.set_title("Latency per BFCL question (shared, busy machine: see load average)", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / "latency.png", dpi=110)
        plt.close(fig)
        written.append("latency.png")
    if robustness:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        variants = ["original", "random", "misleading"]
        for i, (masking, row) in enumerate(robustness["summary"].items()):
            ax.bar([x + i * 0.4 for x in range(3)], [100 * (row[v]["accuracy"] or 0) for v in variants], 0.4, label=masking)
        ax.set_xticks([x + 0.2 for x in range(3)], [f"{v} names" for v in variants])
        ax.set_ylabel("BFCL AST accuracy (%)")
        ax.set_ylim(0, 105)
        ax.legend(fontsize=8)
        ax.set_title("Robustness to names (ChatHammer, constrained)", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / "robustness.png", dpi=110)
        plt.close(fig)
        written.append("robustness.png")
    if speed:
        m = speed["median"]
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.bar(["cold TTFT", "warm TTFT", "cold total", "warm total"],
               [m["cold_ttft_s"] or 0, m["warm_ttft_s"] or 0, m["cold_total_s"] or 0, m["warm_total_s"] or 0],
               color=["tab:red", "tab:green", "tab:red", "tab:green"])
        ax.set_ylabel("seconds (median)")
        ax.set_title(f"{speed['n_tools']}-tool block, KV prefix reuse across turns", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / "speed.png", dpi=110)
        plt.close(fig)
        written.append("speed.png")
    return written


def write_report(out: Path) -> Path:
    """Write ``summary.md`` (and the charts) for the results in ``out``; returns the Markdown path."""
    accuracy, robustness, speed = load_accuracy(out), _load(out / "robustness.json"), _load(out / "speed.json")
    parts: list[str] = []
    model = next((d["model"] for d in (accuracy, robustness, speed) if d and d.get("model")), "?")
    parts.append(f"# Benchmark results: {model}\n")
    for title, data, table in (("BFCL accuracy, side by side", accuracy, accuracy_table),
                               ("Robustness to names", robustness, robustness_table),
                               ("Speed", speed, speed_table)):
        if not data:
            continue
        parts.append(f"## {title}\n")
        if data.get("partial"):
            parts.append("**Partial: the run was interrupted; summarized from the records written so far.**\n")
        if data.get("command"):
            parts.append(f"Command: `{data['command']}` — wall time {data.get('wall_s', '?')} s.\n")
        machine = data.get("machine_before")
        if machine:
            parts.append(f"Machine: {machine.get('cpu')}, {machine.get('cores')} cores, {machine.get('memory_gib', '?')} GiB; "
                         f"load average before {machine.get('load_average')}, after "
                         f"{(data.get('machine_after') or {}).get('load_average')}.\n")
        parts.append(table(data) + "\n")
        if data is accuracy and data.get("excluded_answer_key_defects") is not None:
            defects = sorted(data["excluded_answer_key_defects"]) or "none in these categories"
            parts.append(f"Answer-key defects excluded: {defects}.\n")
    names = charts(out, accuracy, robustness, speed)
    parts += [f"![{n}]({n})\n" for n in names]
    path = out / "summary.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
