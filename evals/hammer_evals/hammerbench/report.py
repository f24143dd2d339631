"""Results of a HammerBench run: JSON, a Markdown table laid out like the paper's Table 9, PNG charts.

Example:
    >>> from hammer_evals.hammerbench.metrics import Metrics
    >>> print(percent(Metrics(acc=0.5).acc))
    50.00
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .data import DATA_TYPES, FILE_SPECS
from .metrics import Metrics

SINGLE_TYPES = ("Perfect", "Imperfect", "External (ST)", "Irrelevant")
MULTI_TYPES = ("sQsA", "mQmA", "mQsA", "sQmA", "SO", "mSv", "External (MT)", "IS")


def percent(value: float | None) -> str:
    """A fraction as a percentage with two decimals, ``-`` when undefined."""
    return "-" if value is None else f"{100 * value:.2f}"


def overall(per_type: dict[str, Metrics]) -> float | None:
    """The unweighted mean of the data types' headline values (Acc; correct refusals for Irrelevant)."""
    values = [m.headline for m in per_type.values() if m.headline is not None]
    return sum(values) / len(values) if values else None


def markdown_table(name: str, per_type: dict[str, Metrics], per_file: dict[str, Metrics],
                   notes: Sequence[str] = ()) -> str:
    """The summary row (data types as columns, as in the paper's Table 9) and the detail tables."""
    columns = [t for t in DATA_TYPES if t in per_type]
    single = [t for t in SINGLE_TYPES if t in columns]
    multi = [t for t in MULTI_TYPES if t in columns]
    lines = ["## HammerBench", ""]
    header = ["Model", "Overall", *[f"ST {_short(t)}" for t in single], *[f"MT {_short(t)}" for t in multi]]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|")
    row = [name, percent(overall(per_type)), *[percent(per_type[t].headline) for t in single + multi]]
    lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Single-turn columns are Acc (Irrelevant: share of correct refusals); multi-turn columns are Acc "
              "over the scored snapshots (SO and External: the listed snapshots; IS: the last one). "
              "Overall is the unweighted mean of the columns.", ""]
    lines += ["### Per data type", ""]
    lines += _detail_table(per_type, "Data type")
    lines += ["", "### Per file", ""]
    lines += _detail_table(per_file, "File")
    if notes:
        lines += ["", *[f"- {note}" for note in notes]]
    return "\n".join(lines) + "\n"


def _short(data_type: str) -> str:
    return data_type.replace(" (ST)", "").replace(" (MT)", "")


def _tick(data_type: str) -> str:
    # Two "External" types (single- and multi-turn): keep them apart on the axis.
    return data_type.replace(" (", "\n(") if data_type.startswith("External") else data_type


def _detail_table(rows: dict[str, Metrics], label: str) -> list[str]:
    header = [label, "records", "snapshots", "Func.Acc", "Acc", "PHR", "PMR", "PR", "SR",
              "PHR first", "PMR first", "PHR last", "PMR last", "no-call acc"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    for key, m in rows.items():
        cells = [key, str(m.records), str(m.snapshots), *[percent(v) for v in (
            m.func_acc, m.acc, m.phr, m.pmr, m.pr, m.sr, m.phr_first, m.pmr_first, m.phr_last, m.pmr_last,
            m.no_call_acc)]]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_charts(per_type: dict[str, Metrics], output_dir: str | Path, title: str = "") -> list[Path]:
    """Three PNGs: accuracy per data type; PR and SR per multi-turn type; first vs last snapshot PHR/PMR."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    types = [t for t in DATA_TYPES if t in per_type]
    suffix = f"\n{title}" if title else ""

    fig, ax = plt.subplots(figsize=(max(7.0, 0.8 * len(types) + 2), 4.4))
    values = [100 * (per_type[t].headline or 0.0) for t in types]
    colors = ["#4C72B0" if t in SINGLE_TYPES else "#DD8452" for t in types]
    bars = ax.bar(range(len(types)), values, color=colors)
    ax.bar_label(bars, labels=[percent(per_type[t].headline) for t in types], fontsize=7, padding=2)
    ax.set_xticks(range(len(types)), [_tick(t) for t in types], rotation=30, ha="right", fontsize=8)
    ax.set_ylim(0, 105)
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"HammerBench accuracy per data type (blue: single-turn, orange: multi-turn){suffix}", fontsize=10)
    ax.set_xlim(-0.6, len(types) - 0.4)
    fig.tight_layout()
    written.append(_save(fig, out / "accuracy.png"))
    plt.close(fig)

    multi = [t for t in MULTI_TYPES if t in per_type and per_type[t].pr is not None]
    if multi:
        written.append(_grouped(plt, multi, {"PR": [per_type[t].pr for t in multi], "SR": [per_type[t].sr for t in multi]},
                                f"Progress rate (PR) and success rate (SR) per multi-turn type{suffix}",
                                out / "progress.png"))
    # Undefined rates (no conversation with the right first function) show as "-" bars of height 0.
    snap_types = [t for t in types if per_type[t].acc is not None]
    if snap_types:
        series = {
            "PHR first": [per_type[t].phr_first for t in snap_types],
            "PHR last": [per_type[t].phr_last for t in snap_types],
            "PMR first": [per_type[t].pmr_first for t in snap_types],
            "PMR last": [per_type[t].pmr_last for t in snap_types],
        }
        title_text = f"Parameter hallucination / missing rate (PHR / PMR), first vs last snapshot{suffix}"
        written.append(_grouped(plt, snap_types, series, title_text, out / "snapshots.png"))
    return written


def _grouped(plt: Any, groups: list[str], series: dict[str, list[float | None]], title: str, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(max(7.0, 1.1 * len(groups) + 2), 4.4))
    width = 0.8 / len(series)
    for k, (label, values) in enumerate(series.items()):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(groups))]
        bars = ax.bar(xs, [100 * (v or 0.0) for v in values], width, label=label)
        ax.bar_label(bars, labels=[percent(v) if v is not None else "n/a" for v in values], fontsize=6, padding=1,
                     rotation=90)
    ax.set_xticks(range(len(groups)), [_tick(g) for g in groups], rotation=30, ha="right", fontsize=8)
    ax.set_xlim(-0.6, len(groups) - 0.4)
    ax.set_ylim(0, 115)
    ax.set_ylabel("%")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncols=len(series), loc="upper left")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return path


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=120)
    return path


def known_file_order(stems: Sequence[str]) -> list[str]:
    """Stems in the paper's order."""
    return [s for s in FILE_SPECS if s in stems]
