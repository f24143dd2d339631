"""Issue 37's class-2 measurements on a real ``hammer serve --openai`` process with the default listener
settings (scripted engine, an API key set), as an attacker would take them:

    .venv/bin/python tests/openai_server/listener_attack.py

1. 12 connections without the key, each sending an 8 MiB body but its last byte, then stalling: the
   server's RSS (/proc/PID/status) before, while they stall, and what they got.
2. 40 connections with half-sent headers: when each was closed, and with what (default header timeout).
3. With the queue full (one request running, ``--queue-per-slot 1``: one waiting), 12 clients posting
   6.5 MiB bodies at once: how long each took to get its 429.

Not a test (no ``test_`` prefix): a measurement, quoted in docs/server.md (Security).
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import socket
import sys
import tempfile
import threading
import time

import httpx

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from test_security import JSON, body, gate_process  # noqa: E402
from test_security_listener import KEY, MIB, flood, head, read_reply, rss, stalled_bodies  # noqa: E402

AUTH = {**JSON, "authorization": f"Bearer {KEY}"}


def unauthenticated_bodies(pid: int, port: int) -> None:
    before = rss(pid)
    sockets = stalled_bodies(port, 12)
    samples = []
    for _ in range(10):  # while they stall
        time.sleep(0.5)
        samples.append(rss(pid))
    deadline = time.monotonic() + 10
    statuses = [read_reply(sock, deadline)[0] for sock in sockets]
    for sock in sockets:
        sock.close()
    print(f"1. 12 stalled unauthenticated 8 MiB bodies: RSS {before / MIB:.1f} MiB before, at most "
          f"{max(samples) / MIB:.1f} MiB over the next 5 s (a rise of {(max(samples) - before) / 10**6:.1f} MB); "
          f"answers {statuses}")


def half_sent_headers(port: int) -> None:
    sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(40)]
    started = time.monotonic()
    for sock in sockets:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
    closed: list[float] = []
    statuses = []
    for sock in sockets:
        status, _, was_closed = read_reply(sock, started + 60)
        statuses.append(status)
        if was_closed:
            closed.append(time.monotonic() - started)
        sock.close()
    print(f"2. 40 half-sent headers: {len(closed)} closed, the first after {min(closed):.2f} s, the last after "
          f"{max(closed):.2f} s; answers {sorted(set(map(str, statuses)))}")


def large_body_flood(url: str, port: int) -> None:
    def hold() -> None:  # stays until the process is killed at the end
        with contextlib.suppress(httpx.HTTPError):
            httpx.post(url + "/v1/chat/completions", headers=AUTH, content=json.dumps(body("HOLD")), timeout=120)

    for _ in range(2):  # one running, one waiting: the queue is full
        threading.Thread(target=hold, daemon=True).start()
        time.sleep(0.3)
    large = json.dumps(body("x" * (13 * MIB // 2))).encode()
    answers = flood(port, large, 12, head(length=len(large), key=KEY))
    took = [seconds for _, seconds in answers]
    statuses = sorted(str(status) for status, _ in answers)
    print(f"3. 12 bodies of {len(large) / MIB:.1f} MiB sent at once with the queue full: {statuses} answered "
          f"{min(took):.3f} to {max(took):.3f} s after each began sending (while the bodies were still going)")


def main() -> None:
    with tempfile.TemporaryDirectory() as folder, gate_process(pathlib.Path(folder), api_key=KEY,
                                                               queue_per_slot=1) as (process, url, port):
        httpx.post(url + "/v1/chat/completions", headers=AUTH, content=json.dumps(body()), timeout=30)  # warm
        unauthenticated_bodies(process.pid, port)
        half_sent_headers(port)
        large_body_flood(url, port)


if __name__ == "__main__":
    main()
