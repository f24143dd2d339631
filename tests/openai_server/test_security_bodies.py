"""Issue 60, item 5: every route reads a body only after admission, ``/api/show`` included.

The red team's attack, on a real ``hammer serve --openai`` process (no key, the default listener): 48
connections to ``/api/show``, each sending an 8 MiB body but its last byte, then stalling. Before, all 48
bodies were read outside the queue (the server's RSS +390 MiB). Now ``/api/show`` refuses a
``Content-Length`` over its own 64 KiB with 413 before a byte is read, and a chunked body once past 64 KiB;
the bodies it does read hold a place in the queue. ``/health`` answers 200 throughout.

A static check holds the rest: every route under ``hammer_plugins/http_api`` reads a body only through
``respond.read_body`` (the queue's place first).
"""

from __future__ import annotations

import ast
import contextlib
import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from test_security import gate_process
from test_security_listener import MIB, at_once, head, read_reply, rss

import hammer_plugins.http_api as http_api

CLIENTS = 48
RSS_BOUND = 150 * 10**6


def _health_while(url: str, stop: threading.Event, answers: list[int]) -> None:
    while not stop.is_set():
        try:
            answers.append(httpx.get(url + "/health", timeout=5).status_code)
        except httpx.HTTPError:
            answers.append(0)
        time.sleep(0.2)


def _attack(tmp_path: Path, send: Any) -> tuple[float, list[int | None], list[int]]:
    """``CLIENTS`` connections to ``/api/show`` each doing ``send(sock)`` at once, then stalling: the RSS rise
    while they stall, their answers, and /health's answers meanwhile."""
    with gate_process(tmp_path, queue_depth=16) as (process, url, port):  # the default queue
        httpx.post(url + "/api/show", json={"model": "hammer"}, timeout=30)  # imports paid before the baseline
        before = rss(process.pid)
        stop, health = threading.Event(), []
        prober = threading.Thread(target=_health_while, args=(url, stop, health))
        prober.start()
        sockets = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(CLIENTS)]
        try:
            at_once(send, [(sock,) for sock in sockets])
            time.sleep(1.0)  # whatever the server was going to read, it has read
            rise = rss(process.pid) - before
            deadline = time.monotonic() + 5
            replies = [read_reply(sock, deadline)[0] for sock in sockets]
        finally:
            stop.set()
            prober.join()
            for sock in sockets:
                sock.close()
        return rise, replies, health


def test_48_stalled_api_show_bodies_are_refused_before_they_are_read(tmp_path: Path) -> None:
    def stall(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):  # the server closes the connection after its 413
            sock.sendall(head(length=8 * MIB, path="/api/show") + b"x" * (8 * MIB - 1))

    rise, replies, health = _attack(tmp_path, stall)
    print(f"{CLIENTS} stalled 8 MiB /api/show bodies: RSS +{rise / MIB:.1f} MiB, answers "
          f"{sorted(str(r) for r in replies)[:3]}..., /health {sorted(set(health))}")
    assert rise < RSS_BOUND, rise
    assert replies == [413] * CLIENTS, replies
    assert health and set(health) == {200}, health


def test_48_stalled_chunked_api_show_bodies_are_cut_at_64_kib(tmp_path: Path) -> None:
    """A chunked body announces no length: it is counted as it comes and refused once past 64 KiB, instead of
    being read up to the listener's 8 MiB while it holds a place in the queue."""
    chunk = b"%x\r\n%s\r\n" % (MIB, b"x" * MIB)

    def stall(sock: socket.socket) -> None:
        request = head(path="/api/show").replace(b"\r\n\r\n", b"\r\nTransfer-Encoding: chunked\r\n\r\n")
        with contextlib.suppress(OSError):
            sock.sendall(request + chunk * 8)

    rise, replies, health = _attack(tmp_path, stall)
    print(f"{CLIENTS} stalled chunked /api/show bodies: RSS +{rise / MIB:.1f} MiB, answers "
          f"{sorted(set(map(str, replies)))}, /health {sorted(set(health))}")
    assert rise < RSS_BOUND, rise
    assert set(replies) <= {413, 429} and 413 in replies, replies  # none held while stalled
    assert health and set(health) == {200}, health


def test_every_route_reads_its_body_through_read_body() -> None:
    """``request.body()``, ``.json()``, ``.form()`` and ``.stream()`` are called only in respond.py's
    read_body (after the queue's place); any other reader would read outside the queue's bound."""
    readers = {"body", "json", "form", "stream"}
    found = []
    for path in Path(http_api.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in readers
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "request"):
                found.append(f"{path.name}:{node.lineno} request.{node.func.attr}()")
    assert all(item.startswith("respond.py:") for item in found), found
    assert found, "read_body no longer reads a body: update this check"
