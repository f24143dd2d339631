"""What the OpenAI-compatible server adds to a call: the README's question asked of the engine in process and
through the server (openai SDK, loopback HTTP, same engine and model), alternated, warm, greedy.

    .venv/bin/python tests/openai_server/overhead.py --repeats 15 [--threads 2]

Not a test (no ``test_`` prefix): a measurement, quoted in docs/server.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from openai import OpenAI

from hammer_plugins import HammerEngine, Message
from hammer_plugins.http_api import BackgroundServer, create_app
from hammer_plugins.tools.definition import to_tools
from hammer_plugins.tools.demo import DEMO_TOOLS

QUESTION = "What's the weather in Paris?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=None)
    options = parser.parse_args()
    engine = HammerEngine(n_threads=options.threads)
    engine.load()
    tools = [t.to_openai() for t in to_tools(DEMO_TOOLS)]
    direct: list[float] = []
    served: list[float] = []
    streamed_first: list[float] = []
    with BackgroundServer(create_app(engine)) as server:
        client = OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
        for _ in range(2):  # warm: the tools prefix in the KV cache, grammar built, connection open
            engine.generate([Message.user(QUESTION)], tools=DEMO_TOOLS)
            client.chat.completions.create(model="hammer", messages=[{"role": "user", "content": QUESTION}], tools=tools)
        for _ in range(options.repeats):
            started = time.perf_counter()
            reply = engine.generate([Message.user(QUESTION)], tools=DEMO_TOOLS)
            direct.append(time.perf_counter() - started)
            assert reply.tool_calls[0].name == "get_weather"
            started = time.perf_counter()
            answer = client.chat.completions.create(model="hammer", messages=[{"role": "user", "content": QUESTION}],
                                                    tools=tools)
            served.append(time.perf_counter() - started)
            assert json.loads(answer.choices[0].message.tool_calls[0].function.arguments)["city"] == "Paris"
            started = time.perf_counter()
            first = None
            for chunk in client.chat.completions.create(model="hammer", stream=True, tools=tools,
                                                        messages=[{"role": "user", "content": QUESTION}]):
                if first is None and chunk.choices and chunk.choices[0].delta.tool_calls:
                    first = time.perf_counter() - started
            streamed_first.append(first or float("nan"))
    median_direct, median_served = statistics.median(direct), statistics.median(served)
    print(json.dumps({
        "model": engine.model_name, "repeats": options.repeats,
        "engine_median_s": round(median_direct, 4), "server_median_s": round(median_served, 4),
        "overhead_median_ms": round((median_served - median_direct) * 1000, 1),
        "overhead_pct": round((median_served / median_direct - 1) * 100, 1),
        "engine_min_s": round(min(direct), 4), "server_min_s": round(min(served), 4),
        "stream_first_call_median_s": round(statistics.median(streamed_first), 4),
    }, indent=1))


if __name__ == "__main__":
    main()
