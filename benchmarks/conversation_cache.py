"""Does a conversation keep its tools, and so its cached prompt, from turn to turn? Cache hits per call over a
five-turn conversation among 1,000 tools, on the default model, with the conversation's offer kept (the engine's
default, ``ConversationOffers``) and without (every turn selects afresh).

The tools: the realistic agent set of benchmarks/data/shadow_tools.json first, then BFCL v4 functions up to
1,000. The user asks about the weather in three cities, then converts two amounts; each call's tool result is
canned. Each variant runs in its own process with its own empty cache folder, so neither finds the other's KV
states. Per call: the tools offered, prompt tokens, prompt tokens a cache served, seconds.

Usage::

    .venv/bin/python benchmarks/conversation_cache.py [--json docs/benchmarks/tools/conversation_cache.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TURNS = ["How warm is it in Lisbon right now?", "And in Oslo?", "Is it colder in Madrid at the moment?",
         "How many euros is 250 US dollars?", "And 80 British pounds?"]
RESULTS = {"get_weather": '{"temperature": 21, "unit": "celsius", "conditions": "sunny"}',
           "get_forecast": '{"days": [{"high": 20, "low": 12, "rain": false}]}',
           "convert_currency": '{"result": 231.4, "rate": 0.9256}'}


def tool_set() -> list[dict[str, Any]]:
    sys.path.insert(0, str(ROOT / "evals"))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from tool_selection_recall import every_function

    from hammer_evals.bfcl.bfcl import to_tool_spec

    own = json.loads((ROOT / "benchmarks" / "data" / "shadow_tools.json").read_text(encoding="utf-8"))["tools"]
    taken = {t["name"] for t in own}
    more = [to_tool_spec(f) for name, f in every_function().items() if name not in taken]
    return own + more[:1000 - len(own)]


def converse(keep_offers: bool) -> list[dict[str, Any]]:
    from hammer_plugins import HammerEngine, Message

    engine = HammerEngine()
    if not keep_offers:
        engine.offer_memory = None
    tools = tool_set()
    messages: list[Message] = []
    rows = []
    for turn, question in enumerate(TURNS):
        messages.append(Message.user(question))
        for step in range(3):  # the call, then the answer from its result (at most one more call)
            started = time.perf_counter()
            response = engine.generate(messages, tools=tools)
            rows.append({"turn": turn + 1, "step": step, "offered": list(response.offered_tools or []),
                         "calls": [c.name for c in response.tool_calls],
                         "prompt_tokens": response.usage.prompt_tokens,
                         "cached_prompt_tokens": response.usage.cached_prompt_tokens or 0,
                         "seconds": round(time.perf_counter() - started, 2)})
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
            messages.append(Message.assistant(response.text if not response.tool_calls else "", response.tool_calls))
            if not response.tool_calls:
                break
            for call in response.tool_calls:
                messages.append(Message.tool(RESULTS.get(call.name, '{"ok": true}'), tool_call_id=call.id,
                                             name=call.name))
    return rows


def run_variant(keep_offers: bool) -> list[dict[str, Any]]:
    """One variant in its own process, with an empty cache folder."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "HAMMER_CACHE_DIR": cache}
        done = subprocess.run([sys.executable, __file__, "--variant", "keep" if keep_offers else "fresh"], env=env,
                              capture_output=True, text=True, check=False, cwd=ROOT)
        sys.stderr.write(done.stderr)
        if done.returncode:
            raise SystemExit(f"the variant failed ({done.returncode}); its output is above")
        return json.loads(done.stdout)


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    prompt = sum(r["prompt_tokens"] for r in rows)
    cached = sum(r["cached_prompt_tokens"] for r in rows)
    later = [r for r in rows if r["turn"] > 1]
    return {"calls": len(rows), "prompt_tokens": prompt, "cached_prompt_tokens": cached,
            "cached_share": round(cached / prompt, 3) if prompt else 0.0,
            "later_turns_cached_share": round(sum(r["cached_prompt_tokens"] for r in later)
                                              / max(1, sum(r["prompt_tokens"] for r in later)), 3),
            "seconds": round(sum(r["seconds"] for r in rows), 1),
            "offers_changed": sum(1 for a, b in zip(rows, rows[1:], strict=False) if a["offered"] != b["offered"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", choices=["keep", "fresh"], help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(converse(args.variant == "keep")))
        return 0
    variants = {"conversation keeps its offer (default)": run_variant(True),
                "every turn selects afresh": run_variant(False)}
    summary = {label: totals(rows) for label, rows in variants.items()}
    for label, figures in summary.items():
        print(f"{label:40s} {json.dumps(figures)}")
    if args.json:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from record import run_facts, write_record

        write_record(args.json, {**run_facts("benchmarks/conversation_cache.py"), "turns": TURNS,
                                 "summary": summary, "rows": variants})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
