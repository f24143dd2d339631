"""`hammer serve --openai` as users start it: a separate process on the embedded default model, asked
with the openai SDK, stopped with Ctrl-C (SIGINT)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest
from openai import OpenAI

from hammer_plugins.backends.server.launcher import free_port
from hammer_plugins.demo_tools import DEMO_TOOLS
from hammer_plugins.tools import to_tools

pytestmark = pytest.mark.real_model


def test_hammer_serve_openai_answers_the_sdk_and_stops_on_ctrl_c(default_model_path: str) -> None:
    port = free_port()
    env = {**os.environ, "HAMMER_SERVER_API_KEY": "cli-key", "HAMMER_MODEL_PATH": default_model_path}
    process = subprocess.Popen(
        [sys.executable, "-m", "hammer_plugins.cli", "serve", "--openai", "--port", str(port), "--n-ctx", "4096",
         "--alias", "hammer-cli"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json()["loaded"]:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.3)
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="cli-key", max_retries=0, timeout=120)
        assert [m.id for m in client.models.list()] == ["hammer-cli"]
        reply = client.chat.completions.create(model="hammer-cli", tools=[t.to_openai() for t in to_tools(DEMO_TOOLS)],
                                               messages=[{"role": "user", "content": "What's the weather in Paris?"}])
        call = reply.choices[0].message.tool_calls[0]
        assert call.function.name == "get_weather" and json.loads(call.function.arguments)["city"] == "Paris"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    output = process.stdout.read() if process.stdout else ""
    assert code == 0, output
    assert "as 'hammer-cli' at http://127.0.0.1:" in output and "without an API key" not in output
    assert "cli-key" not in output  # the key is never printed
