"""Hostile bodies against a real ``hammer serve --openai`` on the default model: what a normal request and
``/health`` see meanwhile.

Three scenarios, each on a fresh server process (in process, the embedded model):

* ``hang_up``: with ``--queue-per-slot 1``, two clients each send a Responses body of 60,000 tools (or of
  40,000 function_call_output items) and hang up 3 s later without reading; then a normal chat request
  (a weather question with the demo tool) must get its 200;
* ``quarter_mib``: four clients send 250 KiB Responses bodies (2,780 tools) at once;
* ``count_tokens``: four clients ask ``/v1/messages/count_tokens`` for a 7.7 MiB text at once;
* ``starvation`` (``--backend llama-server``, whose requests plan on threads): six clients send 2.28 MiB
  Responses bodies (25,000 tools) and hang up 5 s later, while a normal chat request is asked at 1 s and
  again after they left.

Throughout, ``/health`` is polled every 0.1 s; reported: its slowest answer, the normal request's time to
its 200, each client's time to its answer. Loopback only; every loop is bounded.

    .venv/bin/python benchmarks/hostile_bodies.py --output docs/benchmarks/security/hostile_bodies.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

KEY = "hostile-bodies-key"
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    def __init__(self, *flags: str) -> None:
        self.port = free_port()
        env = {**os.environ, "HAMMER_SERVER_API_KEY": KEY}
        self.process = subprocess.Popen([sys.executable, "-m", "hammer_plugins.cli", "serve", "--openai", "--port",
                                         str(self.port), *flags], env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            raise RuntimeError("the server did not start")
        self.ask("warm")  # the model loaded before anything is timed

    def ask(self, text: str) -> tuple[int, float]:
        started = time.perf_counter()
        reply = httpx.post(self.url + "/v1/chat/completions", timeout=120, headers={"authorization": f"Bearer {KEY}"},
                           json={"model": "hammer", "messages": [{"role": "user", "content": text}], "tools": [WEATHER],
                                 "max_tokens": 64})
        return reply.status_code, time.perf_counter() - started

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


class HealthWatch(threading.Thread):
    """Polls /health every 0.1 s until stopped; keeps the slowest answer."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.worst, self.polls, self.failed, self.not_ok = url + "/health", 0.0, 0, 0, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            started = time.perf_counter()
            try:
                self.not_ok += httpx.get(self.url, timeout=30).status_code != 200
            except httpx.HTTPError:
                self.failed += 1
            self.worst = max(self.worst, time.perf_counter() - started)
            self.polls += 1
            self.done.wait(0.1)


def send_and_leave(url: str, path: str, body: bytes, after: float) -> None:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAuthorization: Bearer "
                     f"{KEY}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        time.sleep(after)  # then gone, without reading


def timed_post(url: str, path: str, body: bytes, out: list[float]) -> None:
    started = time.perf_counter()
    httpx.post(url + path, content=body, timeout=120, headers={"authorization": f"Bearer {KEY}",
                                                               "content-type": "application/json"})
    out.append(time.perf_counter() - started)


def responses_tools(n: int) -> bytes:
    tools = [{"type": "function", "name": f"tool_{i}", "parameters": {"type": "object", "properties": {}}}
             for i in range(n)]
    return json.dumps({"model": "hammer", "input": "hi", "tools": tools}).encode()


def responses_outputs(n: int) -> bytes:
    items = [{"role": "user", "content": "hi"}, {"type": "function_call", "call_id": "c1", "name": "f",
                                                 "arguments": "{}"}]
    items += [{"type": "function_call_output", "call_id": "c1", "output": "x"}] * n
    return json.dumps({"model": "hammer", "input": items}).encode()


def hang_up(body: bytes) -> dict[str, Any]:
    server = Server("--queue-per-slot", "1")
    watch = HealthWatch(server.url)
    watch.start()
    try:
        leavers = [threading.Thread(target=send_and_leave, args=(server.url, "/v1/responses", body, 3.0))
                   for _ in range(2)]
        for t in leavers:
            t.start()
        for t in leavers:
            t.join()
        started = time.perf_counter()
        status = 0
        while time.perf_counter() - started < 120 and status != 200:
            status, _ = server.ask("What's the weather in Paris?")
            if status != 200:
                time.sleep(0.5)
        return {"body_MiB": round(len(body) / 2**20, 2), "normal_request_status": status,
                "normal_request_s_after_hang_up": round(time.perf_counter() - started, 2),
                "health_worst_s": round(watch.worst, 3), "health_polls": watch.polls}
    finally:
        watch.done.set()
        server.stop()


def together(path: str, body: bytes, n: int) -> dict[str, Any]:
    server = Server()
    watch = HealthWatch(server.url)
    watch.start()
    try:
        times: list[float] = []
        clients = [threading.Thread(target=timed_post, args=(server.url, path, body, times)) for _ in range(n)]
        for t in clients:
            t.start()
        for t in clients:
            t.join()
        return {"body_KiB": round(len(body) / 1024, 1), "clients": n, "each_s": sorted(round(t, 2) for t in times),
                "health_worst_s": round(watch.worst, 3), "health_polls": watch.polls}
    finally:
        watch.done.set()
        server.stop()


def starvation() -> dict[str, Any]:
    server = Server("--backend", "llama-server")
    watch = HealthWatch(server.url)
    watch.start()
    try:
        body = responses_tools(25_000)
        leavers = [threading.Thread(target=send_and_leave, args=(server.url, "/v1/responses", body, 5.0))
                   for _ in range(6)]
        for t in leavers:
            t.start()
        time.sleep(1.0)
        during = server.ask("What's the weather in Paris?")
        for t in leavers:
            t.join()
        after = server.ask("What's the weather in Paris?")
        return {"body_MiB": round(len(body) / 2**20, 2), "clients": 6, "normal_request_during": list(during),
                "normal_request_after": list(after), "health_worst_s": round(watch.worst, 3),
                "health_not_200": watch.not_ok, "health_failed": watch.failed, "health_polls": watch.polls}
    finally:
        watch.done.set()
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default=None)
    parser.add_argument("--scenarios", default="hang_up,quarter_mib,count_tokens,starvation")
    args = parser.parse_args()
    count_body = json.dumps({"model": "hammer", "messages": [{"role": "user", "content": "word " * 1_615_000}]}).encode()
    chosen = args.scenarios.split(",")
    record: dict[str, Any] = {"benchmark": "benchmarks/hostile_bodies.py",
                              "machine": f"{platform.machine()}, {os.cpu_count()} cores"}
    if args.output and Path(args.output).exists():  # a run of some scenarios keeps the others' figures
        record = {**json.loads(Path(args.output).read_text()), **record}
    if "hang_up" in chosen:
        record["hang_up_60k_tools"] = hang_up(responses_tools(60_000))
        record["hang_up_40k_outputs"] = hang_up(responses_outputs(40_000))
    if "quarter_mib" in chosen:
        record["quarter_mib_bodies"] = together("/v1/responses", responses_tools(2_780), 4)
    if "count_tokens" in chosen:
        record["count_tokens_7_7_mib"] = together("/v1/messages/count_tokens", count_body, 4)
    if "starvation" in chosen:
        record["starvation_llama_server"] = starvation()
    print(json.dumps(record, indent=2))
    if args.output:
        Path(args.output).write_text(json.dumps(record, indent=2) + "\n")


if __name__ == "__main__":
    main()
