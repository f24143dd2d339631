"""Speed of the engine on one model: time to first token cold vs warm with a 20-tool block, our own
overhead per call, load time and peak memory. Medians of several runs in one process.

* cold: the KV cache is cleared before the first turn, so the whole prompt (tools block included)
  is evaluated;
* warm: the next turn of the same conversation (the assistant's call and its tool result appended):
  llama.cpp reuses the cached prefix and evaluates only the new tokens;
* overhead: ``engine_total`` minus the model's ``total`` per call (prompt rendering, tokenizing for
  the context check, grammar lookup, parsing, unmasking), and, in isolation with caches bypassed,
  what a new tool set costs once: schema conversion, prompt rendering, grammar construction, the grammar's
  compilation by llguidance (what the local backends mask tokens with), and parsing an answer.

Example:
    >>> median_or_none([3.0, 1.0, 2.0])
    2.0
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from tqdm import tqdm

from .bfcl import BfclEntry, load_category, to_tool_spec


def median_or_none(values: Sequence[float]) -> float | None:
    """The median, or ``None`` for no values."""
    return statistics.median(values) if values else None


def tool_block(n_tools: int) -> tuple[list[dict[str, Any]], list[BfclEntry]]:
    """``n_tools`` distinct BFCL simple_python functions as tool specs, and the questions that use them."""
    entries, _ = load_category("simple_python")
    tools: dict[str, dict[str, Any]] = {}
    questions: list[BfclEntry] = []
    for entry in entries:
        function = entry.functions[0]
        if function["name"] not in tools:
            tools[function["name"]] = to_tool_spec(function)
            questions.append(entry)
        if len(tools) == n_tools:
            break
    return list(tools.values()), questions


def _time(func: Callable[[], Any], repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        func()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def isolated_overhead(tools: list[dict[str, Any]], repeats: int = 20) -> dict[str, float]:
    """Seconds (medians) of each of our steps for a new tool set, caches bypassed."""
    from hammer_plugins.grammar.builder import build_grammar
    from hammer_plugins.output.parsing import parse_output
    from hammer_plugins.prompt.render import render_prefix, render_prompt
    from hammer_plugins.tools.definition import to_tools
    from hammer_plugins.values.messages import Message

    converted = to_tools(tools)
    prefix = render_prefix(converted, "hammer2.1")
    grammar = build_grammar(converted, "auto", True)
    answer = "```\n" + json.dumps([{"name": converted[0].name, "arguments": {"x": 1}}]) + "\n```"
    result = {
        "schema_conversion_s": _time(lambda: to_tools(tools), repeats),
        "prompt_prefix_render_s": _time(lambda: render_prefix(converted, "hammer2.1"), repeats),
        "prompt_render_s": _time(lambda: render_prompt([Message.user("hi")], converted, "hammer2.1", prefix=prefix), repeats),
        "grammar_build_s": _time(lambda: build_grammar(converted, "auto", True), repeats),
        "parse_s": _time(lambda: parse_output(answer), repeats),
    }
    try:
        import llguidance

        # What a new tool set costs the backends once (then cached): the Lark notation to llguidance's grammar.
        result["grammar_compile_s"] = _time(lambda: llguidance.grammar_from("lark", grammar.lark), max(3, repeats // 4))
    except ImportError:
        pass
    return result


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (2**20 if sys.platform == "darwin" else 2**10)


def run_speed(model_path: str, *, repeats: int = 5, n_tools: int = 20, max_tokens: int = 256, n_ctx: int = 8192,
              n_threads: int | None = None) -> dict[str, Any]:
    """Cold and warm turns of a two-turn conversation over an ``n_tools`` block, ``repeats`` times."""
    from hammer_plugins.engine import HammerEngine
    from hammer_plugins.values.messages import Message

    tools, questions = tool_block(n_tools)
    engine = HammerEngine(model_path=model_path, n_ctx=n_ctx, n_threads=n_threads, max_tokens=max_tokens,
                          tool_budget=0)  # every function the question gives, as BFCL asks
    rss_before = peak_rss_mib()
    engine.load()
    load_s = getattr(engine.backend, "load_seconds", None)
    engine.generate([Message.user("warm-up")], tools=tools[:1], max_tokens=4)  # not measured
    runs: list[dict[str, Any]] = []
    for index in tqdm(range(repeats), desc="speed: cold + warm turns", unit="run"):
        first, second = questions[index % len(questions)], questions[(index + 1) % len(questions)]
        engine.backend.llama.reset()  # type: ignore[attr-defined]  # cold: nothing cached
        history = [Message.user(first.question[-1]["content"])]
        started = time.perf_counter()
        cold = engine.generate(history, tools=tools)
        cold_wall = time.perf_counter() - started
        history.append(Message.assistant(tool_calls=cold.tool_calls) if cold.tool_calls else Message.assistant(cold.text))
        for call in cold.tool_calls:
            history.append(Message.tool("done", tool_call_id=call.id, name=call.name))
        history.append(Message.user(second.question[-1]["content"]))
        started = time.perf_counter()
        warm = engine.generate(history, tools=tools)
        warm_wall = time.perf_counter() - started
        for turn, response, wall in (("cold", cold, cold_wall), ("warm", warm, warm_wall)):
            timings = response.timings
            runs.append({
                "run": index, "turn": turn, "wall_s": wall, "prompt_tokens": response.usage.prompt_tokens,
                "completion_tokens": response.usage.completion_tokens, "kind": response.kind,
                "cached_prompt_tokens": response.usage.cached_prompt_tokens,
                "time_to_first_token_s": timings.time_to_first_token, "model_total_s": timings.total,
                "engine_total_s": timings.engine_total,
                "overhead_s": (timings.engine_total - timings.total)
                if timings.total is not None and timings.engine_total is not None else None,
            })

    def med(turn: str, key: str) -> float | None:
        return median_or_none([r[key] for r in runs if r["turn"] == turn and r[key] is not None])

    cold_ttft, warm_ttft = med("cold", "time_to_first_token_s"), med("warm", "time_to_first_token_s")
    shares = [r["overhead_s"] / r["engine_total_s"] for r in runs if r["overhead_s"] is not None and r["engine_total_s"]]
    return {
        "n_tools": len(tools), "repeats": repeats, "max_tokens": max_tokens,
        "load_s": load_s, "peak_rss_mib": round(peak_rss_mib(), 1), "peak_rss_before_load_mib": round(rss_before, 1),
        "median": {
            "cold_ttft_s": cold_ttft, "warm_ttft_s": warm_ttft,
            "ttft_speedup": (cold_ttft / warm_ttft) if cold_ttft and warm_ttft else None,
            "cold_total_s": med("cold", "engine_total_s"), "warm_total_s": med("warm", "engine_total_s"),
            "cold_prompt_tokens": med("cold", "prompt_tokens"), "warm_prompt_tokens": med("warm", "prompt_tokens"),
            "warm_cached_prompt_tokens": med("warm", "cached_prompt_tokens"),
            "overhead_s": median_or_none([r["overhead_s"] for r in runs if r["overhead_s"] is not None]),
            "overhead_share": median_or_none(shares),
        },
        "isolated_overhead_s": isolated_overhead(tools),
        "runs": runs,
    }
