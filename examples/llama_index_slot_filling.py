"""A mobile assistant that fills tool arguments over several turns: LlamaIndex + HammerLLM slot filling.

Run it (offline; the embedded default model unless you pass a Hammer GGUF):

    python examples/llama_index_slot_filling.py
    python examples/llama_index_slot_filling.py --model-path hammer2.1-1.5b.Q4_K_M.gguf

``SlotFillingWorkflow`` runs one user turn per ``run``: the model emits the call it would make now
(a snapshot) and plain rules compare it with the tool's schema. Missing required arguments give a
follow-up question (``result.snapshot`` says what is known and missing); a complete call runs the
tool and the model answers from its result. One ``Context`` carries the conversation across runs;
``ctx.to_dict()`` stores it, and the messages alone are enough to continue after a restart.

The tools are HammerBench's mobile-assistant tools (schemas from the benchmark, canned results).
The embedded stand-in model is a small base model, not Hammer: it is weak at slot filling.
"""

# No "from __future__ import annotations": FunctionTool reads the Annotated descriptions at runtime.
import argparse
import asyncio
import json
from collections.abc import Sequence
from typing import Annotated

from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Context
from llama_index.llms.hammer import HammerLLM, SlotFillingResult, SlotFillingWorkflow
from pydantic import Field


# HammerBench's traffic-violation and hotel tools (MadeAgents/HammerBench, Apache-2.0): the same
# names, descriptions and parameter descriptions; the results are canned.
def query_violation(plate_number: Annotated[str, Field(description="License plate number")],
                    city: Annotated[str, Field(description="Violating city")],
                    time: Annotated[str, Field(description="Billing Time")]) -> str:
    """Query traffic violation records by conditions"""
    return f"1 record for {plate_number} in {city} ({time}): speeding, fine 200 yuan."


def get_hotel_reservation_history(hotel_name: Annotated[str, Field(description="Hotel name")],
                                  check_in_date: Annotated[str, Field(description="Check-in date")] = "") -> str:
    """Query hotel reservation history"""
    return f"2 stays at {hotel_name}."


def hammerbench_tools() -> list[FunctionTool]:
    """LlamaIndex tools with HammerBench's names and JSON schemas."""
    return [
        FunctionTool.from_defaults(query_violation, name="Navigation.TrafficViolations.queryViolation",
                                   description="Query traffic violation records by conditions"),
        FunctionTool.from_defaults(get_hotel_reservation_history, name="Travel.HotelServices.getHotelReservationHistory",
                                   description="Query hotel reservation history"),
    ]


TURNS = (
    "Check if my car has any illegal records",
    "The violating city is Guangzhou, license plate number Yue B67890.",
    "The billing time is March 2024.",
)


def show(result: SlotFillingResult) -> None:
    snap = result.snapshot
    if result.call is not None:
        print(f"  calls {result.call.name}({json.dumps(result.call.arguments, ensure_ascii=False)})")
        print(f"  tool: {result.tool_output}")
        print(f"  assistant: {result.reply!r}")
    else:
        print(f"  assistant: {result.reply!r}  [snapshot: {snap.function} {snap.arguments} "
              f"missing={snap.missing_required} state={snap.state}]")


async def arun(turns: Sequence[str] = TURNS, model_path: str | None = None,
               max_tokens: int = 64) -> list[SlotFillingResult]:
    """Play ``turns`` through one workflow context; print and return each turn's result."""
    llm = HammerLLM(model_path=model_path, n_ctx=4096, max_tokens=max_tokens)
    flow = SlotFillingWorkflow(llm, hammerbench_tools())
    ctx = Context(flow)
    results: list[SlotFillingResult] = []
    for text in turns:
        print(f"user: {text}")
        result: SlotFillingResult = await flow.run(user_msg=text, ctx=ctx)
        show(result)
        results.append(result)
    return results


def run(turns: Sequence[str] = TURNS, model_path: str | None = None) -> list[SlotFillingResult]:
    """Synchronous :func:`arun`."""
    return asyncio.run(arun(turns, model_path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("turns", nargs="*", help="user turns (default: a traffic-violation query over three turns)")
    parser.add_argument("--model-path", help="a Hammer .gguf (default: the embedded stand-in model)")
    args = parser.parse_args()
    run(args.turns or TURNS, model_path=args.model_path)


if __name__ == "__main__":
    main()
