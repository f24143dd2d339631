"""BFCL multi-turn: an agent loop over bfcl-eval's executable simulators, scored by its own checker.

The categories (``multi_turn_base``, ``multi_turn_miss_func``, ``multi_turn_miss_param``,
``multi_turn_long_context``) give a conversation of several user turns and a set of Python
classes (a file system, a trading bot, ...) whose methods are the tools. For each turn the agent
is asked, its calls are executed on bfcl-eval's own simulators (``execute_multi_turn_func_call``)
and the results go back as tool messages, until it answers without a call or ``max_steps`` steps
have run; the calls of every step are kept as BFCL's call strings. bfcl-eval's
``multi_turn_checker`` (state and responses after each turn, against the ground truth's execution)
and its irrelevance checker (turns whose answer is "nothing to call") give the verdict, as in
bfcl-eval's own runner. A ``miss_func`` entry holds some functions back; they are added at the turn
the entry names, with bfcl-eval's own user prompt for that turn.

An agent is any callable ``(messages, functions) -> calls or text``: ``messages`` in OpenAI chat
form, ``functions`` BFCL function documents, calls as ``[{"name", "arguments"}]``.
:func:`chat_hammer_agent` makes one from ChatHammer.

Example:
    >>> call_string({"name": "cd", "arguments": {"folder": "document"}})
    "cd(folder='document')"
"""

from __future__ import annotations

import ast
import copy
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from hammer_evals.concurrency import run_concurrently
from hammer_evals.model_unavailable import BENCH_FIX, CANNOT_RUN, unavailable

from . import MULTI_TURN_CATEGORIES
from .bfcl import _offline_model_config, _read_jsonl, data_dir, to_tool_spec

CATEGORIES = MULTI_TURN_CATEGORIES  # named in the package, so the command's help reads them without this module
MAX_STEPS = 20
"""Steps per turn before the agent is stopped: bfcl-eval's own limit (MAXIMUM_STEP_LIMIT)."""

Agent = Callable[[list[dict[str, Any]], list[dict[str, Any]]], "list[dict[str, Any]] | str"]


class MultiTurnResult(BaseModel):
    """One entry's run: the call strings of every step of every turn, and the checker's verdict."""

    id: str
    category: str
    steps: list[list[list[str]]]
    valid: bool
    error_type: str = ""
    error: str = ""


def load_entries(category: str, limit: int | None = None, skip: int = 0) -> list[dict[str, Any]]:
    """The category's entries as bfcl-eval's pipeline prepares them: function documents of the involved
    classes attached, held-back functions moved to ``missed_function``, ground truth in ``ground_truth``.
    ``skip`` leaves out the first entries (a later slice of a sample run earlier), ``limit`` keeps so many."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown multi-turn category {category!r}; use one of {list(CATEGORIES)}")
    base = data_dir()
    rows = _read_jsonl(base / f"BFCL_v4_{category}.json")[skip:None if limit is None else skip + limit]
    answers = {row["id"]: row["ground_truth"] for row in _read_jsonl(base / "possible_answer" / f"BFCL_v4_{category}.json")}
    _offline_model_config()
    from bfcl_eval.utils import populate_test_cases_with_predefined_functions

    rows = populate_test_cases_with_predefined_functions(copy.deepcopy(rows))
    for row in rows:
        row["ground_truth"] = answers[row["id"]]
    return rows


def call_string(call: Mapping[str, Any]) -> str:
    """A call as the Python expression bfcl-eval executes and checks: ``name(arg=value, ...)``."""
    arguments = ", ".join(f"{key}={value!r}" for key, value in (call.get("arguments") or {}).items())
    return f"{call['name']}({arguments})"


def parse_call_string(text: str, functions: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The inverse of :func:`call_string`, for ground-truth strings (literal arguments); positional
    arguments (``sort('a.txt')``) are named after the function document's parameters, in order.

    Example:
        >>> parse_call_string("mv(source='a.txt', destination='tmp')")
        {'name': 'mv', 'arguments': {'source': 'a.txt', 'destination': 'tmp'}}
        >>> parse_call_string("sort('a.txt')", [{"name": "sort", "parameters": {"properties": {"file_name": {}}}}])
        {'name': 'sort', 'arguments': {'file_name': 'a.txt'}}
    """
    node = ast.parse(text, mode="eval").body
    if not isinstance(node, ast.Call):
        raise ValueError(f"not a call: {text!r}")
    name = ast.unparse(node.func)
    arguments: dict[str, Any] = {}
    if node.args:
        doc = next((f for f in functions if f.get("name") == name), None)
        if doc is None:
            raise ValueError(f"{text!r} has positional arguments and {name!r} has no function document to name them")
        for parameter, value in zip((doc.get("parameters") or {}).get("properties", {}), node.args, strict=False):
            arguments[parameter] = ast.literal_eval(value)
    arguments.update({k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})
    return {"name": name, "arguments": arguments}


def run_entry(entry: Mapping[str, Any], agent: Agent, max_steps: int = MAX_STEPS,
              run_id: str | None = None) -> MultiTurnResult:
    """Drive ``agent`` through every turn of ``entry`` on fresh simulators, then check the result."""
    _offline_model_config()
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    # bfcl-eval keeps simulator instances in a module global keyed by this name and the entry id:
    # a new name per run starts from the entry's initial state.
    tag = run_id or f"hammer_{uuid.uuid4().hex[:12]}"
    category = entry["id"].rsplit("_", 1)[0]
    functions = list(entry["function"])
    holdout = entry.get("missed_function", {})
    messages: list[dict[str, Any]] = []
    steps: list[list[list[str]]] = []
    for turn_index, turn in enumerate(entry["question"]):
        if str(turn_index) in holdout:
            functions += holdout[str(turn_index)]
            turn = [{"role": "user", "content": DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC}]
        messages.extend(turn)
        turn_steps: list[list[str]] = []
        for step_index in range(max_steps):
            answer = agent(messages, functions)
            if isinstance(answer, str) or not answer:
                messages.append({"role": "assistant", "content": answer if isinstance(answer, str) else ""})
                break
            calls = [call_string(call) for call in answer]
            results, _ = execute_multi_turn_func_call(
                calls, entry["initial_config"], entry["involved_classes"], tag, entry["id"],
                long_context="long_context" in category)
            turn_steps.append(calls)
            ids = [f"call_{turn_index}_{step_index}_{i}" for i in range(len(answer))]
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"id": i, "type": "function", "function": {"name": c["name"], "arguments": c.get("arguments") or {}}}
                for i, c in zip(ids, answer, strict=True)]})
            messages.extend({"role": "tool", "tool_call_id": i, "content": str(r)} for i, r in zip(ids, results, strict=True))
        steps.append(turn_steps)
    return check(entry, steps, tag)


def check(entry: Mapping[str, Any], steps: list[list[list[str]]], tag: str) -> MultiTurnResult:
    """bfcl-eval's verdict on the call strings of every step of every turn."""
    _offline_model_config()
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (
        multi_turn_checker,
        multi_turn_irrelevance_checker,
    )

    category = entry["id"].rsplit("_", 1)[0]
    ground_truth = entry["ground_truth"]
    verdict: dict[str, Any] = {"valid": True}
    if len(steps) != len(ground_truth):
        verdict = {"valid": False, "error_type": "multi_turn:force_terminated", "error_message": "turn count"}
    if verdict["valid"] and any(not turn for turn in ground_truth):
        verdict = multi_turn_irrelevance_checker(steps, ground_truth)
    if verdict["valid"]:
        verdict = multi_turn_checker(steps, ground_truth, dict(entry), category, tag)
    return MultiTurnResult(id=entry["id"], category=category, steps=steps, valid=bool(verdict["valid"]),
                           error_type=str(verdict.get("error_type", "")), error=str(verdict.get("error_message", ""))[:500])


def replay_agent(entry: Mapping[str, Any]) -> Agent:
    """An agent that answers each turn with its ground-truth calls, in one step, then stops: the oracle
    run that bfcl-eval's checker must accept (a test of the runner, not of a model)."""
    turns = iter(entry["ground_truth"])
    pending: list[list[dict[str, Any]]] = []

    def agent(messages: list[dict[str, Any]], functions: list[dict[str, Any]]) -> list[dict[str, Any]] | str:
        if messages and messages[-1]["role"] == "user":
            pending.append([parse_call_string(c, functions) for c in next(turns)])
        return pending.pop() if pending else "done"

    return agent


def chat_hammer_agent(llm: Any) -> Agent:
    """An agent backed by a LangChain chat model (ChatHammer): tools bound per step, its calls or its text.

    An ask (``on_missing="ask"``) is text with the held-back calls in its metadata; the loop keeps only the
    text, so the agent remembers where each ask landed (the history only grows) and gives its held-back calls
    back on that message, as a client that keeps the extension field does: the next turn completes them."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    asks: dict[int, Any] = {}  # position of an ask in the history -> its hammer_pending_calls

    def agent(messages: Sequence[dict[str, Any]], functions: Sequence[dict[str, Any]]) -> list[dict[str, Any]] | str:
        converted: list[Any] = []
        for position, m in enumerate(messages):
            if m["role"] == "user":
                converted.append(HumanMessage(m["content"]))
            elif m["role"] == "system":
                converted.append(SystemMessage(m["content"]))
            elif m["role"] == "tool":
                converted.append(ToolMessage(m["content"], tool_call_id=m["tool_call_id"]))
            else:
                pending = {"hammer_pending_calls": asks[position]} if position in asks else {}
                converted.append(AIMessage(m.get("content") or "", additional_kwargs=pending, tool_calls=[
                    {"id": c["id"], "name": c["function"]["name"], "args": c["function"]["arguments"]}
                    for c in m.get("tool_calls", [])]))
        message = llm.bind_tools([to_tool_spec(f) for f in functions]).invoke(converted)
        if message.tool_calls:
            return [{"name": c["name"], "arguments": c["args"]} for c in message.tool_calls]
        if message.additional_kwargs.get("hammer_pending_calls"):
            asks[len(messages)] = message.additional_kwargs["hammer_pending_calls"]
        return str(message.content)

    return agent


MULTI_TURN_RUNNERS = ("hammer", "hammer-mask", "hammer-call", "hammer-ask", "chatllamacpp")
"""The runners that can drive an agent loop (LangChain chat models with ``bind_tools``)."""


def run_multi_turn(model_path: str, runners: Sequence[str], categories: Sequence[str], sample: int | None,
                   out: Any, *, max_steps: int = MAX_STEPS, max_tokens: int = 256, n_ctx: int = 8192,
                   n_threads: int | None = None, progress: bool = True, base_url: str | None = None,
                   concurrency: int = 1, skip: int = 0) -> dict[str, dict[str, Any]]:
    """Every runner on the first ``sample`` entries of each category (after ``skip`` of them); one JSON line per entry in
    ``out/multi_turn_records.jsonl``; the accuracy per runner and category. With ``base_url`` the
    ChatHammer runners ask that server, ``concurrency`` conversations at a time."""
    import json
    import time
    from pathlib import Path

    from tqdm import tqdm

    from .runners import make_runner

    records = Path(out) / "multi_turn_records.jsonl"
    records.parent.mkdir(parents=True, exist_ok=True)
    data = {category: load_entries(category, sample, skip) for category in categories}
    summary: dict[str, dict[str, Any]] = {}
    with records.open("w", encoding="utf-8") as stream:
        for kind in runners:
            if kind not in MULTI_TURN_RUNNERS:
                raise ValueError(f"runner {kind!r} cannot drive an agent loop; use one of {list(MULTI_TURN_RUNNERS)}")
            runner: Any = make_runner(kind, model_path, max_tokens=max_tokens, n_ctx=n_ctx, n_threads=n_threads,
                                      base_url=base_url)
            llm = runner.llm
            if kind.startswith("hammer"):
                # An agent turn here may take several steps (cd, then mv): the steps cap ends it instead.
                llm = llm.model_copy(update={"max_tool_rounds": None})
            agent = chat_hammer_agent(llm)
            summary[runner.name] = {}
            at_once = concurrency if getattr(runner, "concurrent", False) else 1
            for category, entries in data.items():
                correct = 0

                def drive(entry: dict[str, Any], agent: Agent = agent,
                          name: str = runner.name) -> tuple[MultiTurnResult, float]:
                    started = time.perf_counter()
                    try:
                        result = run_entry(entry, agent, max_steps=max_steps)
                    except CANNOT_RUN as exc:  # no entry can run: stop (hammer_evals.model_unavailable)
                        raise unavailable(name, exc, BENCH_FIX) from exc
                    except Exception as exc:  # noqa: BLE001 - a crash is a failed entry, recorded with its cause
                        result = MultiTurnResult(id=entry["id"], category=entry["id"].rsplit("_", 1)[0], steps=[],
                                                 valid=False, error_type="runner_error",
                                                 error=f"{type(exc).__name__}: {exc}"[:500])
                    return result, time.perf_counter() - started

                bar = tqdm(run_concurrently(drive, entries, at_once), total=len(entries), desc=f"{runner.name} {category}",
                           disable=not progress, dynamic_ncols=True)
                for _, (result, seconds) in bar:
                    correct += result.valid
                    stream.write(json.dumps({"runner": runner.name, "seconds": round(seconds, 2),
                                             **result.model_dump()}) + "\n")
                    stream.flush()
                summary[runner.name][category] = {"correct": correct, "entries": len(entries)}
    return summary


def summary_table(summary: Mapping[str, Mapping[str, Mapping[str, int]]]) -> str:
    """A Markdown table: runners down, categories across, ``correct/entries`` per cell.

    Example:
        >>> print(summary_table({"r": {"multi_turn_base": {"correct": 1, "entries": 2}}}))
        | runner | multi_turn_base |
        |---|---|
        | r | 1/2 |
    """
    categories = list(next(iter(summary.values()), {}))
    lines = ["| runner | " + " | ".join(categories) + " |", "|---" * (len(categories) + 1) + "|"]
    for name, cells in summary.items():
        lines.append(f"| {name} | " + " | ".join(f"{cells[c]['correct']}/{cells[c]['entries']}" for c in categories) + " |")
    return "\n".join(lines)
