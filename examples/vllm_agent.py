"""A LangChain agent on vLLM alone: Hammer's chat template and tool parser, LangChain's own ChatOpenAI.

Start vLLM with Hammer's template and plugin first (`hammer vllm` prints the exact command; on a GPU):

    vllm serve MadeAgents/Hammer2.1-7b --served-model-name hammer --port 8000 --generation-config vllm \\
        --chat-template .../hammer_plugins/prompt/templates/hammer.jinja --enable-auto-tool-choice \\
        --tool-parser-plugin .../hammer_plugins/vllm_plugin/vllm_tool_parser.py --tool-call-parser hammer

then run this file:

    .venv/bin/python examples/vllm_agent.py

The agent calls get_weather, gets its result, and answers in prose: after a tool result the template
asks Hammer for the answer (docs/server.md, "Scale out on vLLM"). For a chain where one result feeds
the next call, `chain=True` asks for the tools prompt again instead (chat_template_kwargs
``hammer_after_tools="call"``). `HAMMER_VLLM_URL`, `HAMMER_VLLM_API_KEY` and `HAMMER_VLLM_MODEL`
override the server, key and model name.
"""

from __future__ import annotations

import os
from typing import Any

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name, e.g. Paris.
    """
    return f"Cloudy, 14 degrees Celsius in {city}"


def hammer_on_vllm(base_url: str, api_key: str, model: str = "hammer", chain: bool = False) -> ChatOpenAI:
    """LangChain's ChatOpenAI for vLLM serving Hammer with its template and tool parser; ``chain=True``
    shows Hammer the tools again after a tool result (a call may follow), instead of asking for the answer."""
    return ChatOpenAI(base_url=base_url, api_key=api_key, model=model, temperature=0, max_tokens=96,
                      extra_body={"chat_template_kwargs": {"hammer_after_tools": "call"}} if chain else None)


def build_agent(base_url: str, api_key: str, model: str = "hammer", tools: list[Any] | None = None,
                chain: bool = False) -> Any:
    """A LangChain agent whose model is Hammer on vLLM."""
    return create_agent(hammer_on_vllm(base_url, api_key, model, chain), tools if tools is not None else [get_weather])


if __name__ == "__main__":
    url = os.environ.get("HAMMER_VLLM_URL", "http://127.0.0.1:8000").rstrip("/").removesuffix("/v1") + "/v1"
    agent = build_agent(url,
                        os.environ.get("HAMMER_VLLM_API_KEY", "none"), os.environ.get("HAMMER_VLLM_MODEL", "hammer"))
    result = agent.invoke({"messages": [("user", "What's the weather in Paris?")]}, {"recursion_limit": 8})
    for message in result["messages"]:
        message.pretty_print()
