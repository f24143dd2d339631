"""Hammer for any OpenAI client: the openai SDK against `hammer serve --openai`.

Start the server first (it loads the model in process and serves it on loopback):

    .venv/bin/hammer serve --openai                      # http://127.0.0.1:8080/v1, model "hammer"
    HAMMER_SERVER_API_KEY=... .venv/bin/hammer serve --openai --port 8080   # with a key
    .venv/bin/hammer serve --openai --backend llama-server --parallel 4   # batched, on llama-server behind it

then run this file:

    .venv/bin/python examples/openai_client.py

It starts nothing itself. It asks a question with tools, runs the call it gets back, hands the result
to the model for the answer, then streams a parallel call and shows a refusal. Any other OpenAI
client works the same way (base URL, key, model name "hammer"). `HAMMER_OPENAI_URL` overrides the URL.
"""

from __future__ import annotations

import json
import os

from openai import OpenAI

from hammer_plugins.tools import to_tools
from hammer_plugins.tools.demo import DEMO_TOOLS

BASE_URL = os.environ.get("HAMMER_OPENAI_URL", "http://127.0.0.1:8080/v1")
client = OpenAI(base_url=BASE_URL, api_key=os.environ.get("HAMMER_SERVER_API_KEY") or "none")
TOOLS = [tool.to_openai() for tool in to_tools(DEMO_TOOLS)]  # OpenAI tool dicts: {"type": "function", ...}
RUN = {tool.__name__: tool for tool in DEMO_TOOLS}


def agent_turn(question: str) -> str:
    """One question, its tool calls run here, and the model's answer from the results."""
    messages: list[dict] = [{"role": "user", "content": question}]
    reply = client.chat.completions.create(model="hammer", messages=messages, tools=TOOLS)
    message = reply.choices[0].message
    if not message.tool_calls:  # a refusal (message.refusal is set) or a plain answer
        return message.content or ""
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls:
        result = RUN[call.function.name](**json.loads(call.function.arguments))
        print(f"  called {call.function.name}({call.function.arguments}) -> {result}")
        messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    final = client.chat.completions.create(model="hammer", messages=messages, tools=TOOLS, max_tokens=80)
    return final.choices[0].message.content or ""


def stream_calls(question: str) -> None:
    """Stream a parallel call: each call's first delta has its id and name, the arguments follow."""
    arguments: dict[int, str] = {}
    for chunk in client.chat.completions.create(model="hammer", messages=[{"role": "user", "content": question}],
                                                tools=TOOLS, stream=True, stream_options={"include_usage": True}):
        if chunk.usage:
            print(f"  usage: {chunk.usage.prompt_tokens} prompt + {chunk.usage.completion_tokens} completion tokens")
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            if call.id:
                print(f"  call {call.index}: {call.function.name} (id {call.id})")
            arguments[call.index] = arguments.get(call.index, "") + (call.function.arguments or "")
    for index, text in sorted(arguments.items()):
        print(f"  call {index} arguments: {json.loads(text)}")


if __name__ == "__main__":
    print("models:", [m.id for m in client.models.list()])
    print("What is 17 * 23?")
    print("  answer:", agent_turn("What is 17 * 23?"))
    print("What's the weather in Paris and in Rome? (streamed)")
    stream_calls("What's the weather in Paris and in Rome?")
    # The stand-in default model over-calls; a real Hammer model answers [] here, which becomes:
    reply = client.chat.completions.create(model="hammer", messages=[{"role": "user", "content": "Tell me a joke"}],
                                           tools=TOOLS)
    message = reply.choices[0].message
    print("Tell me a joke ->", "refusal: " + message.refusal if message.refusal else
          [c.function.name for c in message.tool_calls or []] or message.content)
