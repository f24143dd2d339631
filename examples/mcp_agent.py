"""A real MCP server's tools in LangChain's ``create_agent`` and in a LlamaIndex ``FunctionAgent``.

The server is ``mcp-server-time`` from PyPI (stdio, no network): tools ``get_current_time(timezone)``
and ``convert_time(source_timezone, time, target_timezone)``. LangChain reads it through
``langchain-mcp-adapters`` (async-only tools), LlamaIndex through ``llama-index-tools-mcp``; both
bind to Hammer as they come. Runs offline on the embedded default model, or on a real Hammer GGUF:

    pip install "langchain-hammer[mcp,llama-cpp,default-model]" "llama-index-llms-hammer[mcp]" langchain mcp-server-time
    python examples/mcp_agent.py
    python examples/mcp_agent.py --model-path ~/models/Hammer2.1-1.5b.Q4_K_M.gguf \
        --question "What time is it in Tokyo when it is 14:30 in Paris?"
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

QUESTION = "Convert 14:30 in Paris (Europe/Paris) to New York time (America/New_York)."


def time_server_command(timezone: str = "UTC") -> list[str]:
    """The command that starts mcp-server-time with this Python (argv form)."""
    return [sys.executable, "-m", "mcp_server_time", "--local-timezone", timezone]


# ------------------------------------------------------------------ LangChain
async def langchain_tools(command: list[str]) -> list[Any]:
    """The server's tools as LangChain tools (async-only ``StructuredTool`` s)."""
    from langchain_mcp_adapters.client import MultiServerMCPClient

    client = MultiServerMCPClient({"time": {"command": command[0], "args": command[1:], "transport": "stdio"}})
    return await client.get_tools()


async def run_langchain(question: str = QUESTION, command: list[str] | None = None, **llm: Any) -> list[Any]:
    """``create_agent(ChatHammer(), tools)`` on the MCP tools; the conversation's messages."""
    from langchain.agents import create_agent
    from langchain_hammer import ChatHammer

    tools = await langchain_tools(command or time_server_command())
    agent = create_agent(ChatHammer(**llm), tools)
    result = await agent.ainvoke({"messages": [("user", question)]})  # MCP tools are async-only: ainvoke
    return result["messages"]


# ------------------------------------------------------------------ LlamaIndex
async def llama_index_tools(command: list[str]) -> list[Any]:
    """The server's tools as LlamaIndex ``FunctionTool`` s."""
    from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

    client = BasicMCPClient(command[0], args=command[1:])
    return await McpToolSpec(client=client).to_tool_list_async()


async def run_llama_index(question: str = QUESTION, command: list[str] | None = None,
                          **llm: Any) -> tuple[str, list[tuple[str, dict[str, Any], str]]]:
    """A ``FunctionAgent`` with ``HammerLLM`` on the MCP tools: its answer and the calls it ran."""
    from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
    from llama_index.llms.hammer import HammerLLM

    from hammer_plugins.mcp import tool_result_text

    tools = await llama_index_tools(command or time_server_command())
    agent = FunctionAgent(tools=tools, llm=HammerLLM(**llm),
                          system_prompt="You answer with the tools' results.")
    handler = agent.run(user_msg=question)
    calls = []
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            # The output's content is str(CallToolResult); the model is given its text, shown here too.
            output = str(event.tool_output.content)
            calls.append((event.tool_name, dict(event.tool_kwargs), (tool_result_text(output) or (output,))[0]))
    answer = await handler
    return str(answer), calls


def _print_langchain(messages: list[Any]) -> None:
    for message in messages:
        calls = getattr(message, "tool_calls", None)
        content = message.content if isinstance(message.content, str) else message.content[0].get("text", "")
        print(f"  {type(message).__name__}: {content.strip()[:300]!r}" + (f" calls={calls}" if calls else ""))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", help="a Hammer GGUF (default: the embedded default model)")
    parser.add_argument("--question", default=QUESTION)
    args = parser.parse_args()
    llm = {"model_path": args.model_path} if args.model_path else {}

    started = time.perf_counter()
    print(f"=== LangChain create_agent + mcp-server-time: {args.question}")
    _print_langchain(await run_langchain(args.question, **llm))
    print(f"  ({time.perf_counter() - started:.1f} s)")

    started = time.perf_counter()
    print(f"\n=== LlamaIndex FunctionAgent + mcp-server-time: {args.question}")
    answer, calls = await run_llama_index(args.question, **llm)
    for name, kwargs, output in calls:
        print(f"  tool call: {name}({kwargs}) -> {output[:200]!r}")
    print(f"  answer: {answer}\n  ({time.perf_counter() - started:.1f} s)")


if __name__ == "__main__":
    asyncio.run(main())
