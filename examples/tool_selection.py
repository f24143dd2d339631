"""A thousand tools, and the few a question needs: Hammer's tool selection from LangChain, and your own selector.

Run it (offline; the embedded default model unless you pass a Hammer GGUF):

    python examples/tool_selection.py
    python examples/tool_selection.py --model-path Hammer2.1-1.5b.Q4_K_M.gguf

A tool set over the tool budget (1,000 tools here: a few real ones among generated look-alike chores) is not
sent whole: the engine offers the tools that fit the question by meaning, in any language, as many as its parts
ask for (docs/tools.md, tool selection). ``response_metadata["offered_tools"]`` shows what the model saw.

1. the default selector ("meaning"): a paraphrase, a Chinese question, and a question of two parts;
2. your own selector, a plain function ``(question, tools) -> names`` (a LangChain retriever or a LlamaIndex
   ``ObjectRetriever`` plug in the same way: ``RetrieverToolSelector``, ``ObjectRetrieverToolSelector``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage
from langchain_hammer import ChatHammer

from hammer_plugins.tools import Tool

REAL_TOOLS: list[dict[str, Any]] = [
    {"name": "get_weather", "description": "Get the current weather conditions and temperature for a city.",
     "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name."}},
                    "required": ["city"]}},
    {"name": "convert_currency", "description": "Convert an amount of money from one currency to another.",
     "parameters": {"type": "object", "properties": {
         "amount": {"type": "number"}, "from_currency": {"type": "string", "description": "Code, e.g. USD."},
         "to_currency": {"type": "string", "description": "Code, e.g. EUR."}},
         "required": ["amount", "from_currency", "to_currency"]}},
    {"name": "send_email", "description": "Send an email message to a recipient.",
     "parameters": {"type": "object", "properties": {
         "to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}},
         "required": ["to", "body"]}},
]
QUESTIONS = ["Do I need a coat in Oslo today?", "巴黎现在的天气怎么样？",
             "How many euros is 250 US dollars? Then email the answer to bob@example.com."]


def many_tools(count: int = 1000) -> list[dict[str, Any]]:
    """The real tools among ``count`` generated ones ("Archive record 17 of the ledger ...")."""
    chores = ["archive", "index", "tag", "rename", "audit", "merge", "split", "export", "sync", "purge"]
    things = ["ledger", "invoice batch", "photo album", "sensor log", "playlist", "ticket queue", "recipe card"]
    generated = [{"name": f"{chores[i % 10]}_{things[i % 7].replace(' ', '_')}_{i}",
                  "description": f"{chores[i % 10].title()} record {i} of the {things[i % 7]}.",
                  "parameters": {"type": "object", "properties": {"record": {"type": "integer"}}}}
                 for i in range(count - len(REAL_TOOLS))]
    return generated[:400] + REAL_TOOLS + generated[400:]


def ask(chat: ChatHammer, tools: list[dict[str, Any]], question: str) -> AIMessage:
    reply = chat.bind_tools(tools).invoke(question)
    assert isinstance(reply, AIMessage)
    calls = ", ".join(f"{c['name']}({c['args']})" for c in reply.tool_calls) or repr(reply.content)
    print(f"  {question}\n    offered: {reply.response_metadata.get('offered_tools')}\n    answer:  {calls}")
    return reply


def keyword_selector(question: str, tools: Sequence[Tool]) -> list[str]:
    """Your own rule: any function of the question (and the tools) returning names, best first."""
    wanted = {"weather": "get_weather", "天气": "get_weather", "euro": "convert_currency", "email": "send_email"}
    return [name for word, name in wanted.items() if word in question.lower()]


def main(argv: list[str] | None = None) -> dict[str, list[AIMessage]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-path", help="a Hammer GGUF (default: the embedded default model)")
    args = parser.parse_args(argv)
    options: dict[str, Any] = {"max_tokens": 200}
    if args.model_path:
        options["model_path"] = args.model_path
    tools = many_tools()
    replies: dict[str, list[AIMessage]] = {"meaning": [], "own": []}
    print(f"1. the default selector, among {len(tools)} tools")
    chat = ChatHammer(**options)
    replies["meaning"] = [ask(chat, tools, q) for q in QUESTIONS]
    print("2. your own selector")
    own = ChatHammer(tool_selector=keyword_selector, **options)
    replies["own"] = [ask(own, tools, q) for q in QUESTIONS[1:]]
    return replies


if __name__ == "__main__":
    main()
