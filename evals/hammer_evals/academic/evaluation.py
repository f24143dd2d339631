"""One academic evaluation: run a model (or read its answers), score each set, write the reports.

A run covers one or more *variants*: the test data with its own names (``original``) or masked
ones (``masked``, the case study), each with inference-time masking off or on. Answers are asked in
prompt order (prompts that share a prefix follow each other, so llama.cpp reuses its KV cache),
appended to ``answers.jsonl`` as they come, and ``--resume`` asks only what is missing (after
checking ``run_settings.json``). Outputs: ``results.json``, ``table.md`` (the paper's Table 3 layout
with its published rows beside ours, and the case-study table when there are several variants),
``f1.png``.

Example:
    >>> from hammer_plugins import HammerEngine, ScriptedBackend
    >>> from hammer_evals.academic.data import AcademicEntry
    >>> from hammer_plugins.messages import Message
    >>> entry = AcademicEntry(set="sealtool", index=0, messages=[Message.user("Time in Paris?")],
    ...     tools=[{"name": "getTime", "parameters": {"type": "object", "properties": {"city": {"type": "str"}}}}],
    ...     gold=[{"name": "getTime", "arguments": {"city": "Paris"}}])
    >>> engine = HammerEngine(backend=ScriptedBackend(['[{"name": "getTime", "arguments": {"city": "Paris"}}]']))
    >>> result = evaluate_entries({"sealtool": [entry]}, engine=engine, progress=False)
    >>> result.scores["original, inference masking off"]["sealtool"].f1_api
    1.0
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from hammer_plugins.engine import HammerEngine
from hammer_plugins.response import HammerResponse

from ..concurrency import effective_concurrency, run_concurrently
from ..run_journal import RUN_SETTINGS, check_resumable, drop_partial_line, write_json
from .data import SETS, AcademicEntry, load_set
from .masking import mask_entry
from .metrics import PAPER_ROWS, SetScore, score_answers

Names = Literal["original", "masked"]
ANSWERS = "answers.jsonl"


class Variant(BaseModel):
    """Which names the test data shows (``original`` or ``masked``) and whether the engine masks too.

    Example:
        >>> Variant(names="masked", mask_names=True).label
        'masked, inference masking on'
    """

    names: Names = "original"
    mask_names: bool = False

    @property
    def label(self) -> str:
        return f"{self.names}, inference masking {'on' if self.mask_names else 'off'}"


def prediction_text(response: HammerResponse) -> str:
    """The answer as the metric reads it, in the tools' real names: with inference masking the model
    wrote masked names, which the engine maps back into ``tool_calls``; a refusal is ``[]``; anything
    else (invalid calls, prose) stays the model's own text, and scores as such.

    Example:
        >>> from hammer_plugins import ToolCall
        >>> prediction_text(HammerResponse(kind="tool_calls", raw='[{"name": "Xy1", "arguments": {}}]',
        ...                                tool_calls=[ToolCall(name="getTime", arguments={"city": "Oslo"})]))
        '[{"name": "getTime", "arguments": {"city": "Oslo"}}]'
    """
    if response.kind == "tool_calls":
        return json.dumps([{"name": c.name, "arguments": c.arguments} for c in response.tool_calls],
                          ensure_ascii=False)
    return "[]" if response.kind == "refusal" else response.raw


class Answer(BaseModel):
    """One model answer, as journaled and as a predictions file holds it."""

    set: str
    index: int
    names: Names = "original"
    mask_names: bool = False
    predict: str
    raw: str | None = Field(default=None, description="the model's own text when predict differs from it "
                                                      "(inference masking: predict has the real names)")
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def key(self) -> tuple[str, int, str, bool]:
        return (self.set, self.index, self.names, self.mask_names)


class AcademicResult(BaseModel):
    """Scores per variant label and set, with how the run went."""

    name: str
    scores: dict[str, dict[str, SetScore]] = Field(default_factory=dict)
    answers: int = 0
    asked: int = 0
    wall_seconds: float = 0.0
    model_seconds: float = 0.0
    settings: dict[str, Any] = Field(default_factory=dict)


def run_settings(engine: HammerEngine) -> dict[str, Any]:
    """What decides a model's answers besides the data: what a resumed run must share."""
    return {"model": engine.model_name, "backend": engine.backend_name, "prompt_format": engine.prompt_format,
            "constrained": engine.constrained,
            # shared_prefix_chars describes each prompt, not the sampling: never part of a run's settings
            "sampling": engine.settings.model_dump(mode="json", exclude={"shared_prefix_chars"})}


def variant_entries(entries: Mapping[str, Sequence[AcademicEntry]], variant: Variant,
                    seed: int = 0) -> dict[str, list[AcademicEntry]]:
    """The entries as ``variant`` shows them (the masked names of the case study when asked)."""
    if variant.names == "original":
        return {name: list(rows) for name, rows in entries.items()}
    return {name: [mask_entry(e, seed) for e in rows] for name, rows in entries.items()}


def evaluate_entries(entries: Mapping[str, Sequence[AcademicEntry]], *, engine: HammerEngine | None = None,
                     answers: Iterable[Answer] = (), variants: Sequence[Variant] = (Variant(),),
                     output_dir: str | Path | None = None, resume: bool = False, progress: bool = True,
                     name: str | None = None, seed: int = 0, concurrency: int = 1) -> AcademicResult:
    """Score every variant of ``entries``: answers given, else asked of ``engine`` (and journaled).

    ``concurrency``: questions in flight at once (a server with several slots; 1 for a local model).
    """
    started = time.perf_counter()
    out = Path(output_dir) if output_dir is not None else None
    known = {a.key: a for a in answers}
    asked = 0
    if engine is not None:
        known, asked = _ask(engine, entries, variants, out, resume, progress, seed, known, concurrency)
    result = AcademicResult(name=name or (engine.model_name if engine else "predictions"), answers=len(known),
                            asked=asked, settings=run_settings(engine) if engine else {})
    for variant in variants:
        shown = variant_entries(entries, variant, seed)
        result.scores[variant.label] = {
            set_name: score_answers((known[(e.set, e.index, variant.names, variant.mask_names)].predict, e.gold)
                                    for e in rows if (e.set, e.index, variant.names, variant.mask_names) in known)
            for set_name, rows in shown.items()}
    result.model_seconds = sum(a.seconds for a in known.values())
    result.wall_seconds = time.perf_counter() - started
    if out is not None:
        write_reports(result, out)
    return result


def _ask(engine: HammerEngine, entries: Mapping[str, Sequence[AcademicEntry]], variants: Sequence[Variant],
         out: Path | None, resume: bool, progress: bool, seed: int,
         known: dict[tuple[str, int, str, bool], Answer],
         concurrency: int = 1) -> tuple[dict[tuple[str, int, str, bool], Answer], int]:
    from tqdm.auto import tqdm

    path = out / ANSWERS if out is not None else None
    if out is not None:
        settings = run_settings(engine)
        if resume:
            check_resumable(out, settings)
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / RUN_SETTINGS, settings)
        if resume and path is not None and path.is_file():
            drop_partial_line(path)
            known.update({a.key: a for a in load_answers(path)})
    todo = []
    for variant in variants:
        for rows in variant_entries(entries, variant, seed).values():
            for entry in rows:
                if (entry.set, entry.index, variant.names, variant.mask_names) not in known:
                    prompt = engine.render(entry.messages, entry.tools, mask_names=variant.mask_names)
                    todo.append((prompt, entry, variant))
    todo.sort(key=lambda item: item[0])  # neighbours share prefixes: llama.cpp re-evaluates less

    def ask(item: tuple[str, AcademicEntry, Variant]) -> Answer:
        _, entry, variant = item
        began = time.perf_counter()
        response = engine.generate(entry.messages, entry.tools, mask_names=variant.mask_names)
        predict = prediction_text(response) if variant.mask_names else response.raw
        return Answer(set=entry.set, index=entry.index, names=variant.names, mask_names=variant.mask_names,
                      predict=predict, raw=response.raw if predict != response.raw else None,
                      seconds=time.perf_counter() - began, prompt_tokens=response.usage.prompt_tokens,
                      completion_tokens=response.usage.completion_tokens)

    with contextlib.ExitStack() as stack:
        stream = stack.enter_context(path.open("a" if resume else "w", encoding="utf-8")) if path else None
        bar = stack.enter_context(tqdm(total=len(todo), unit="answer", disable=not progress, dynamic_ncols=True))
        for (_, entry, variant), answer in run_concurrently(ask, todo, effective_concurrency(engine, concurrency)):
            bar.set_description(f"{entry.set} ({variant.names}{', masking' if variant.mask_names else ''})")
            known[answer.key] = answer
            if stream is not None:
                stream.write(answer.model_dump_json() + "\n")
                stream.flush()
            bar.update(1)
    return known, len(todo)


def load_answers(path: str | Path) -> list[Answer]:
    """The answers of a predictions file (JSON Lines of ``{"set", "index", "predict", ...}``)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [Answer.model_validate_json(line) for line in lines if line.strip()]


def evaluate(data_dir: str | Path, *, sets: Sequence[str] | None = None, limit: int | None = None,
             **kwargs: Any) -> AcademicResult:
    """Load the sets from ``data_dir`` and :func:`evaluate_entries` them."""
    chosen = list(sets or SETS)
    return evaluate_entries({name: load_set(data_dir, name, limit) for name in chosen}, **kwargs)


# ------------------------------------------------------------------ reports
def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def markdown_table(result: AcademicResult) -> str:
    """The paper's Table 3 layout (F1 Func-Name / F1 Func.+Args per set), published rows beside ours."""
    sets = [s for s in SETS if any(s in scores for scores in result.scores.values())]
    head = "| model | " + " | ".join(f"{SETS[s]} F1 Func-Name | {SETS[s]} F1 Func.+Args" for s in sets) + " |"
    lines = [head, "|---|" + "---:|" * (2 * len(sets))]
    for label, scores in result.scores.items():
        row = " | ".join(f"{_pct(scores[s].f1_api)} | {_pct(scores[s].f1_args)}" if s in scores else "- | -"
                         for s in sets)
        lines.append(f"| {result.name} ({label}) | {row} |")
    for model, published in PAPER_ROWS.items():
        row = " | ".join(f"{published[s][0]:.2f} | {published[s][1]:.2f}" for s in sets)
        lines.append(f"| {model}, published (paper Table 3) | {row} |")
    counts = "; ".join(f"{SETS[s]} {next(iter(result.scores.values()))[s].answers}" for s in sets)
    return "\n".join(lines) + f"\n\nAnswers scored per set: {counts}.\n"


def write_reports(result: AcademicResult, out: Path) -> dict[str, Path]:
    """``results.json``, ``table.md`` and ``f1.png`` in ``out``."""
    paths = {"results": write_json(out / "results.json", result.model_dump(mode="json"))}
    table = out / "table.md"
    table.write_text(f"# {result.name}\n\n{markdown_table(result)}", encoding="utf-8")
    paths["table"] = table
    paths["chart"] = _chart(result, out / "f1.png")
    return paths


def _chart(result: AcademicResult, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = [s for s in SETS if any(s in scores for scores in result.scores.values())]
    series = {f"{label}: {level}": [100 * (getattr(scores[s], attr) or 0) for s in sets]
              for label, scores in result.scores.items() for level, attr in (("name", "f1_api"), ("args", "f1_args"))}
    fig, ax = plt.subplots(figsize=(max(6, 2 + 2 * len(sets)), 4))
    width = 0.8 / max(1, len(series))
    for i, (label, values) in enumerate(series.items()):
        ax.bar([x + i * width for x in range(len(sets))], values, width, label=label)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(sets))], [SETS[s] for s in sets])
    ax.set_ylabel("F1 (%)")
    # The published formula can exceed 100 (its recall counts repeated calls): show those bars whole.
    ax.set_ylim(0, max(100.0, *(max(values, default=0) for values in series.values())) * 1.05)
    ax.axhline(100, color="grey", linewidth=0.6)
    ax.set_title(result.name)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def results_json(path: str | Path) -> dict[str, Any]:
    """A results.json read back (for comparing runs)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))
