"""LlamaIndex agents on a local Hammer model: FunctionAgent (plain and streaming) and AgentWorkflow.

Runs offline on the embedded default model (Qwen2.5-Coder-0.5B-Instruct, the base of
Hammer2.1-0.5b, not a Hammer fine-tune), or on a real Hammer GGUF:

    python examples/llama_index_agent.py
    python examples/llama_index_agent.py --model-path ~/models/Hammer2.1-1.5b.Q4_K_M.gguf --parallel
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import time

from llama_index.core.agent.workflow import AgentStream, AgentWorkflow, FunctionAgent, ToolCallResult
from llama_index.core.workflow.handler import WorkflowHandler
from llama_index.llms.hammer import HammerLLM


def multiply(a: float, b: float) -> float:
    """Multiply two numbers and return the product.

    Args:
        a (float): The first number.
        b (float): The second number.
    """
    return a * b


def add(a: float, b: float) -> float:
    """Add two numbers and return the sum.

    Args:
        a (float): The first number.
        b (float): The second number.
    """
    return a + b


def days_until(date: str) -> int:
    """Count the days from today until a date.

    Args:
        date (str): The date in ISO format, e.g. 2030-01-01.
    """
    return (dt.date.fromisoformat(date) - dt.date.today()).days


async def show(title: str, handler: WorkflowHandler, stream_text: bool = False) -> None:
    """Print each tool call with its result, the streamed answer if asked, then the final answer."""
    print(f"\n=== {title}")
    started = time.perf_counter()
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            print(f"tool call: {event.tool_name}({event.tool_kwargs}) -> {event.tool_output.content}")
        elif stream_text and isinstance(event, AgentStream) and event.delta:
            print(event.delta, end="", flush=True)
    answer = await handler
    if stream_text:
        print()
    print(f"answer: {answer}  [{time.perf_counter() - started:.1f} s]")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-path", help="a Hammer .gguf file (default: the embedded stand-in model)")
    parser.add_argument("--parallel", action="store_true",
                        help="allow several calls per answer (good for Hammer; the stand-in then over-calls)")
    args = parser.parse_args()

    # Greedy and short answers; the model loads once and is shared by every agent below.
    llm = HammerLLM(model_path=args.model_path, n_ctx=4096, max_tokens=128, parallel_tool_calls=args.parallel)
    started = time.perf_counter()
    llm.load()
    print(f"model: {llm.metadata.model_name} (context {llm.metadata.context_window} tokens, "
          f"loaded in {time.perf_counter() - started:.1f} s)")

    agent = FunctionAgent(tools=[multiply, add, days_until], llm=llm, streaming=False)
    await show("FunctionAgent", agent.run("What is 12.5 times 4?"))

    streaming = FunctionAgent(tools=[multiply, add, days_until], llm=llm)  # streams by default
    await show("FunctionAgent, streaming", streaming.run("How many days are left until 2030-01-01?"), stream_text=True)

    workflow = AgentWorkflow.from_tools_or_functions([multiply, add, days_until], llm=llm)
    await show("AgentWorkflow.from_tools_or_functions", workflow.run("What is 1234 plus 4321?"))


if __name__ == "__main__":
    asyncio.run(main())
