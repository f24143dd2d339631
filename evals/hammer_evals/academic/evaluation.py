"""One academic evaluation: run a model (or read its answers), score each set, write the reports.

A run covers one or more *variants*: the test data with its own names (``original``) or masked
ones (``masked``, the case study), each with inference-time masking off or on. Answers are asked in
prompt order (prompts that share a prefix follow each other, so llama.cpp reuses its KV cache),
appended to ``answers.jsonl`` as they come, and ``--resume`` asks only what is missing (after
checking ``run_settings.json``). Outputs: ``results.json``, ``table.md`` (the paper's Table 3 layout
with its published rows beside ours, and the case-study table when there are several variants),
``f1.png``.

Every variant is scored by one path, as the authors' ``evaluation/evaluate.py`` scores an answer:
the model's text, with the inference mask's names mapped back (:func:`answer_text`), so a list cut
at ``max_tokens`` or a malformed one is a format error whether masking was on or off. What the
engine recovers from such text (its parsed calls) is scored apart, for every variant alike, as the
*engine answer* (``engine_scores``).

Example:
    >>> from hammer_plugins import HammerEngine, ScriptedBackend
    >>> from hammer_evals.academic.data import AcademicEntry
    >>> from hammer_plugins.values.messages import Message
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
from hammer_plugins.output.response import HammerResponse
from hammer_plugins.tools.definition import to_tools
from hammer_plugins.tools.masking import NameMask

from ..concurrency import effective_concurrency, run_concurrently
from ..run_journal import RUN_SETTINGS, check_resumable, drop_partial_line, write_json
from .data import SETS, AcademicEntry, load_set
from .masking import mask_entry
from .metrics import PAPER_ROWS, SetScore, parse_answer, score_answers

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


def inference_mask(entry: AcademicEntry) -> NameMask:
    """The names the engine shows for ``entry``'s tools with inference masking on: a pure function of
    the tool set (:meth:`NameMask.for_tools`, what :meth:`HammerEngine.bind` builds), so answers
    journaled long ago can be read back without the engine."""
    return NameMask.for_tools(to_tools(entry.tools))


def answer_text(raw: str, mask: NameMask | None = None) -> str:
    """The model's text as the authors' metric reads it, with masked names mapped back to real ones.

    The text is read as the metric reads it (:func:`parse_answer`); in a call list that parses, each
    masked function name and its masked parameter names become the real ones (a name the mask does
    not know stays, and scores as wrong). Text that does not parse is returned as it is: the metric
    counts it as one predicted call and nothing correct, whatever names it holds, so a list cut at
    ``max_tokens`` or a malformed one counts as the authors' pipeline counts it. Without a mask
    (inference masking off) the text is returned unchanged.

    Example:
        >>> mask = NameMask(masked_tools=[], function_names={"Xy1q": "getTime"},
        ...                 parameter_names={"getTime": {"kQ9z": "city"}})
        >>> answer_text('```\\n[{"name": "Xy1q", "arguments": {"kQ9z": "Oslo"}}]\\n```', mask)
        '[{"name": "getTime", "arguments": {"city": "Oslo"}}]'
        >>> answer_text('[{"name": "Xy1q", "arguments": {"kQ9z": "Os', mask)  # cut: a format error either way
        '[{"name": "Xy1q", "arguments": {"kQ9z": "Os'
    """
    if mask is None:
        return raw
    calls = parse_answer(raw)
    if calls is None:
        return raw
    return json.dumps([_unmasked(call, mask) for call in calls], ensure_ascii=False)


def _unmasked(call: Any, mask: NameMask) -> Any:
    if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
        return call
    real = mask.function_names.get(call["name"])
    if real is None:
        return call
    renamed = mask.parameter_names.get(real, {})
    arguments = call.get("arguments")
    if isinstance(arguments, Mapping):
        arguments = {renamed.get(k, k): v for k, v in arguments.items()}
    return {**call, "name": real, "arguments": arguments}


def engine_answer(response: HammerResponse, mask: NameMask | None = None) -> str:
    """The engine's answer in the tools' real names, for the separate *engine answer* score: the
    calls it parsed (complete calls before a ``max_tokens`` cut kept), ``[]`` for a refusal, else the
    model's text as :func:`answer_text` reads it. Not the authors' scorer: it shows what the engine
    recovers.

    Example:
        >>> from hammer_plugins import ToolCall
        >>> engine_answer(HammerResponse(kind="tool_calls", raw='[{"name": "getTime", "arguments": {"city": "Os',
        ...                              tool_calls=[ToolCall(name="getTime", arguments={"city": "Oslo"})]))
        '[{"name": "getTime", "arguments": {"city": "Oslo"}}]'
    """
    if response.kind == "tool_calls":
        return json.dumps([{"name": c.name, "arguments": c.arguments} for c in response.tool_calls],
                          ensure_ascii=False)
    return "[]" if response.kind == "refusal" else answer_text(response.raw, mask)


class Answer(BaseModel):
    """One model answer, as journaled and as a predictions file holds it."""

    set: str
    index: int
    names: Names = "original"
    mask_names: bool = False
    predict: str = Field(description="the model's text with masked names mapped back (answer_text): what the "
                                     "authors' metric scores")
    raw: str | None = Field(default=None, description="the model's own text when predict differs from it "
                                                      "(inference masking: predict has the real names)")
    engine: str | None = Field(default=None, description="the engine's answer (engine_answer), scored apart as "
                                                         "'engine answer'; None in files written before it")
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
    engine_scores: dict[str, dict[str, SetScore]] = Field(
        default_factory=dict, description="the engine's parsed calls scored by the same metric (not the authors' "
                                          "pipeline), per variant and set, where every answer has one")
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
        result.scores[variant.label], engine_scores = {}, {}
        for set_name, rows in shown.items():
            pairs = [(known[(e.set, e.index, variant.names, variant.mask_names)], e) for e in rows
                     if (e.set, e.index, variant.names, variant.mask_names) in known]
            # One path for every variant: the model's text, masked names mapped back (answer_text).
            result.scores[variant.label][set_name] = score_answers((scored_text(a, e), e.gold) for a, e in pairs)
            if pairs and all(a.engine is not None for a, _ in pairs):
                engine_scores[set_name] = score_answers((a.engine or "", e.gold) for a, e in pairs)
        if engine_scores:
            result.engine_scores[variant.label] = engine_scores
    result.model_seconds = sum(a.seconds for a in known.values())
    result.wall_seconds = time.perf_counter() - started
    if out is not None:
        write_reports(result, out)
    return result


def scored_text(answer: Answer, entry: AcademicEntry) -> str:
    """What the metric scores for ``answer`` (``entry`` as its variant showed it), whichever variant:
    the model's own text (``raw``, else ``predict``) with the inference mask's names mapped back. Read
    from ``raw``, journals written before ``predict`` held this text score the same way."""
    mask = inference_mask(entry) if answer.mask_names else None
    return answer_text(answer.raw if answer.raw is not None else answer.predict, mask)


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
        mask = inference_mask(entry) if variant.mask_names else None
        predict = answer_text(response.raw, mask)
        return Answer(set=entry.set, index=entry.index, names=variant.names, mask_names=variant.mask_names,
                      predict=predict, raw=response.raw if predict != response.raw else None,
                      engine=engine_answer(response, mask),
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
    text = "\n".join(lines) + f"\n\nAnswers scored per set: {counts}.\n"
    if len(result.scores) > 1:
        text += ("\n## Case study: F1 Func-Name / F1 Func.+Args (right calls / predicted calls, format errors)\n\n"
                 + _case_table(result.scores, sets))
    if result.engine_scores:
        text += ("\n## Engine answer (not the authors' scorer): the engine's parsed calls, scored by the same "
                 "metric\n\nComplete calls before a cut at max_tokens count here; the rows above count such an "
                 "answer as one format error, as the authors' pipeline does. A variant shows only when every "
                 "answer recorded an engine answer (older journals kept one with inference "
                 "masking on only).\n\n"
                 + _case_table(result.engine_scores, sets))
    return text


def _case_cell(score: SetScore | None) -> str:
    if score is None:
        return "-"
    return (f"{_pct(score.f1_api)} / {_pct(score.f1_args)} ({score.correct_calls}/{score.predicted_calls}, "
            f"{score.format_errors})")


def _case_table(scores: Mapping[str, Mapping[str, SetScore]], sets: Sequence[str]) -> str:
    """One row per variant: ``F1 name / F1 args (right/predicted, N format errors)`` per set."""
    lines = ["| test data's names | inference masking | " + " | ".join(SETS[s] for s in sets) + " |",
             "|---|---|" + "---|" * len(sets)]
    for label, per_set in scores.items():
        names, masking = label.split(", inference masking ")
        lines.append(f"| {names} | {masking} | " + " | ".join(_case_cell(per_set.get(s)) for s in sets) + " |")
    return "\n".join(lines) + "\n"


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
    # The published formula can exceed 100: its recall counts every predicted call of a gold function
    # (repeated calls), and a correct call of an argument-free gold function counts one matched
    # argument that neither denominator holds. Show those bars whole.
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
