"""What llama-server's own chat API makes of Hammer's answers under Hammer's template.

Starts the project's llama-server build on the default model with ``--jinja --chat-template-file
hammer_plugins/prompt/templates/hammer.jinja`` (the template vLLM users get), asks its
``/v1/chat/completions`` a few questions with two tools, greedy, and prints per question what came
back: ``tool_calls`` (llama-server's parser found calls) or plain ``content``, and the finish
reason. No grammar is sent: this is llama-server on its own, as a client that talks to it directly
would see it. The rendered prompt (``/apply-template``) is compared with the engine's
``render_prompt`` on the same tools.

Usage::

    .venv/bin/python benchmarks/llama_server_jinja.py [--threads 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import hammer_plugins
from hammer_plugins import Message, Tool
from hammer_plugins.launch.llama_server_binary import find_or_build_llama_server
from hammer_plugins.models.source import default_model_path
from hammer_plugins.prompt.render import render_prompt

TEMPLATE = Path(hammer_plugins.__file__).parent / "prompt" / "templates" / "hammer.jinja"
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "multiply", "description": "Multiply two integers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"]}}},
]
QUESTIONS = [
    ("What's the weather in Paris?", [("get_weather", {"city": "Paris"})]),
    ("What is 12 times 9?", [("multiply", {"a": 12, "b": 9})]),
    ("What's the weather in Rome and in Lima?", [("get_weather", {"city": "Rome"}), ("get_weather", {"city": "Lima"})]),
    ("Tell me a joke about cats.", []),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, body: dict[str, Any], timeout: float = 600) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return json.load(reply)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    binary = find_or_build_llama_server()
    model = default_model_path()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = Path(tempfile.mkstemp(prefix="llama-server-jinja-", suffix=".log")[1])
    command = [str(binary), "-m", str(model), "--jinja", "--chat-template-file", str(TEMPLATE),
               "--host", "127.0.0.1", "--port", str(port), "-c", "4096", "-t", str(args.threads), "-np", "1"]
    child = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
    rows: list[dict[str, Any]] = []
    try:
        started = time.monotonic()
        while True:
            if child.poll() is not None:
                raise SystemExit(f"llama-server exited with {child.returncode}; its log: {log}")
            try:
                urllib.request.urlopen(f"{base}/health", timeout=2).close()
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() - started > 600:
                    raise SystemExit(f"llama-server not healthy after 600 s; its log: {log}") from None
                time.sleep(0.5)

        rendered = _post(f"{base}/apply-template", {"messages": [{"role": "user", "content": QUESTIONS[0][0]}],
                                                    "tools": TOOLS})["prompt"]
        ours = render_prompt([Message.user(QUESTIONS[0][0])], [Tool.from_openai(t) for t in TOOLS])
        print(f"template rendered by llama-server == render_prompt: {rendered == str(ours)}")

        for question, expected in QUESTIONS:
            began = time.monotonic()
            reply = _post(f"{base}/v1/chat/completions", {
                "messages": [{"role": "user", "content": question}], "tools": TOOLS,
                "max_tokens": args.max_tokens, "temperature": 0})
            choice = reply["choices"][0]
            message = choice["message"]
            calls = [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                     for c in message.get("tool_calls") or []]
            row = {"question": question, "expected": expected, "tool_calls": calls,
                   "content": message.get("content"), "finish_reason": choice["finish_reason"],
                   "right": [tuple(c) for c in calls] == [tuple(e) for e in expected],
                   "seconds": round(time.monotonic() - began, 2)}
            rows.append(row)
            print(json.dumps(row, ensure_ascii=False))
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
    right = sum(r["right"] for r in rows)
    with_prose = sum(bool(r["tool_calls"]) and bool((r["content"] or "").strip()) for r in rows)
    print(f"right: {right}/{len(rows)}; answers with calls and prose beside them: {with_prose}")
    if args.json:
        args.json.write_text(json.dumps({"command": command, "rows": rows}, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
