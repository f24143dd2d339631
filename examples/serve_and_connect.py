"""Serve a Hammer model on llama.cpp's C++ llama-server, and use it from LangChain like a local one.

Run it (offline; the embedded default model unless you pass a Hammer GGUF):

    python examples/serve_and_connect.py
    python examples/serve_and_connect.py --model-path Hammer2.1-1.5b.Q4_K_M.gguf --parallel 4

It does in one script what you would do in two terminals:

    hammer serve --parallel 4                       # terminal 1: the server, until Ctrl-C
    ChatHammer(backend="server", base_url="http://127.0.0.1:8080/v1", model="hammer")   # your code

``LlamaServer`` starts the same server ``hammer serve`` runs (on loopback, a free port, stopped at
the end), then ``ChatHammer`` asks it several questions at once with ``abatch``: the server decodes
its slots together (continuous batching), and each answer is a tool call for its own question.
``hammer serve`` builds the server the first time it runs (``scripts/test.sh`` does too), then keeps it cached.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from langchain_hammer import ChatHammer

from hammer_plugins.launch import LlamaServer
from hammer_plugins.models.source import default_model_path
from hammer_plugins.tools.demo import DEMO_TOOLS

QUESTIONS = ["What's the weather in Paris?", "What is 23 * 47?", "What's the weather in Tokyo in fahrenheit?",
             "Email bob@example.com that the meeting moved to 3pm."]


async def ask_all(base_url: str, questions: list[str]) -> list[Any]:
    """Every question at once through ChatHammer on the server; the tool calls of each answer."""
    llm = ChatHammer(backend="server", base_url=base_url, model="hammer").bind_tools(DEMO_TOOLS)
    answers = await llm.abatch(questions)
    return [[(c["name"], c["args"]) for c in answer.tool_calls] for answer in answers]


def run(model_path: str | None = None, parallel: int = 4, questions: list[str] = QUESTIONS) -> list[Any]:
    """Start the server, ask, stop it; the calls per question."""
    with LlamaServer(model_path or default_model_path(), parallel=parallel, n_ctx=4096) as server:
        return asyncio.run(ask_all(server.base_url, questions))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", help="a Hammer .gguf file (default: the embedded stand-in)")
    parser.add_argument("--parallel", type=int, default=4, help="server slots (default: 4)")
    args = parser.parse_args()
    for question, calls in zip(QUESTIONS, run(args.model_path, args.parallel), strict=True):
        print(f"{question}\n  -> {calls}")


if __name__ == "__main__":
    main()
