"""Robustness to names (Hammer paper, section 3.2): the same BFCL questions with function and parameter
names replaced by random strings, or swapped to misleading ones; accuracy with and without masking.

Only the names change: descriptions, the question and the expected values stay, and the possible
answers are renamed the same way, so bfcl-eval's checker scores the renamed calls.

Example:
    >>> import random
    >>> entry = BfclEntry(id="x", category="simple_python", question=[{"role": "user", "content": "5!"}],
    ...     functions=[{"name": "math.factorial", "description": "n!", "parameters": {"type": "dict",
    ...         "properties": {"number": {"type": "integer"}}, "required": ["number"]}}],
    ...     ground_truth=[{"math.factorial": {"number": [5]}}])
    >>> renamed = random_names(entry, random.Random(0))
    >>> list(renamed.ground_truth[0]) == [renamed.functions[0]["name"]] != ["math.factorial"]
    True
"""

from __future__ import annotations

import copy
import json
import random
import string
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from .accuracy import load_entries
from .bfcl import BfclEntry, score
from .runners import ChatHammerRunner

_ALPHABET = string.ascii_letters + string.digits + "_."
VARIANTS = ("original", "random", "misleading")


def _random_name(rng: random.Random, low: int, high: int, taken: set[str]) -> str:
    while True:
        name = rng.choice(string.ascii_letters) + "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(low, high) - 1))
        if name not in taken:
            taken.add(name)
            return name


def rename(entry: BfclEntry, function_map: Mapping[str, str], param_maps: Mapping[str, Mapping[str, str]],
           variant: str) -> BfclEntry:
    """The entry with functions, required lists and possible answers renamed (top-level parameters only)."""
    functions = []
    for function in entry.functions:
        new = copy.deepcopy(function)
        pmap = param_maps.get(function["name"], {})
        new["name"] = function_map.get(function["name"], function["name"])
        params = new.get("parameters") or {}
        if isinstance(params.get("properties"), Mapping):
            params["properties"] = {pmap.get(k, k): v for k, v in params["properties"].items()}
        if isinstance(params.get("required"), list):
            params["required"] = [pmap.get(k, k) for k in params["required"]]
        functions.append(new)
    truth = [{function_map.get(name, name): {param_maps.get(name, {}).get(k, k): v for k, v in args.items()}
              for name, args in item.items()} for item in entry.ground_truth]
    return entry.model_copy(update={"id": f"{entry.id}#{variant}", "functions": functions, "ground_truth": truth})


def random_names(entry: BfclEntry, rng: random.Random) -> BfclEntry:
    """Function names → 5-15 random characters, parameter names → 4-10 (the paper's alphabet)."""
    taken: set[str] = set()
    function_map = {f["name"]: _random_name(rng, 5, 15, taken) for f in entry.functions}
    param_maps = {}
    for function in entry.functions:
        own: set[str] = set()
        props = (function.get("parameters") or {}).get("properties") or {}
        param_maps[function["name"]] = {p: _random_name(rng, 4, 10, own) for p in props}
    return rename(entry, function_map, param_maps, "random")


def misleading_names(entry: BfclEntry, rng: random.Random, function_pool: Sequence[str],
                     param_pool: Sequence[str]) -> BfclEntry:
    """Names that mean something else: function names of other BFCL functions; parameter names rotated
    among the function's own parameters (so ``base`` is called ``height``), or, for a single parameter,
    a parameter name of another function."""
    own_names = {f["name"] for f in entry.functions}
    candidates = [n for n in function_pool if n not in own_names]
    function_map = dict(zip(sorted(own_names), rng.sample(candidates, len(own_names)), strict=True))
    param_maps: dict[str, dict[str, str]] = {}
    for function in entry.functions:
        props = list((function.get("parameters") or {}).get("properties") or {})
        if len(props) >= 2:
            param_maps[function["name"]] = dict(zip(props, props[1:] + props[:1], strict=True))
        elif props:
            others = [p for p in param_pool if p != props[0]]
            param_maps[function["name"]] = {props[0]: rng.choice(others)}
    return rename(entry, function_map, param_maps, "misleading")


def name_pools(entries: Sequence[BfclEntry]) -> tuple[list[str], list[str]]:
    """Every function name and every top-level parameter name in the entries (sorted, deduplicated)."""
    functions = sorted({f["name"] for e in entries for f in e.functions})
    params = sorted({p for e in entries for f in e.functions for p in ((f.get("parameters") or {}).get("properties") or {})})
    return functions, params


def variants_of(entries: Sequence[BfclEntry], pool_entries: Sequence[BfclEntry], seed: int = 0) -> dict[str, list[BfclEntry]]:
    """The original entries and their random-name and misleading-name versions."""
    rng = random.Random(seed)
    functions, params = name_pools(pool_entries)
    return {"original": list(entries), "random": [random_names(e, rng) for e in entries],
            "misleading": [misleading_names(e, rng, functions, params) for e in entries]}


def run_robustness(model_path: str, categories: Sequence[str], sample: int | None, seed: int = 0, *,
                   max_tokens: int = 256, n_ctx: int = 8192, n_threads: int | None = None,
                   records_file: Path | None = None) -> dict[str, Any]:
    """ChatHammer (constrained) with masking off and on over the three name variants."""
    entries, _ = load_entries(categories, sample, seed)
    pool, _ = load_entries(categories, None, seed)
    variants = variants_of(entries, pool, seed)
    if records_file is not None:
        records_file.parent.mkdir(parents=True, exist_ok=True)
        records_file.unlink(missing_ok=True)
    summary: dict[str, dict[str, Any]] = {}
    for masked in (False, True):
        runner = ChatHammerRunner(model_path, constrained=True, mask_names=masked, max_tokens=max_tokens, n_ctx=n_ctx,
                                  n_threads=n_threads)
        for variant, items in variants.items():
            correct = 0
            for entry in tqdm(items, desc=f"{runner.name} / {variant} names", unit="q"):
                outcome = runner.answer(entry)
                verdict = score(entry, outcome.bfcl_output)
                correct += verdict.correct
                if records_file is not None:
                    with records_file.open("a", encoding="utf-8") as handle:
                        handle.write(json.dumps({"masking": masked, "variant": variant, "id": entry.id,
                                                 "correct": verdict.correct, "error": verdict.error,
                                                 "output": outcome.bfcl_output}, ensure_ascii=False, default=str) + "\n")
            summary.setdefault(f"masking {'on' if masked else 'off'}", {})[variant] = {
                "correct": correct, "n": len(items), "accuracy": correct / len(items) if items else None}
    return {"summary": summary, "questions": len(entries)}
