"""Issue 37, classes 2 and 4: the listener's cheap checks, and loopback on a dual-stack ``--host ::``,
on a scripted engine (no model) behind a real uvicorn: in this process on a loopback port, or a real
``hammer serve --openai`` process started through the runner (test_security.gate_process).

- The size and the key are checked from the headers: a body that announces 8 MiB and has no key gets
  401 before it is sent (one over 8 MiB gets 413 and its connection closed); 12 such bodies stalled
  one byte short of their end raise the server's memory by under 20 MB (measured on the process,
  /proc/PID/status): what arrives after the 401 is dropped, never kept.
- Deadlines: 40 connections with half-sent headers, one trickling a header byte at a time, one that
  sends nothing and a stalled body are each answered 408 and closed at their deadline.
- The queue's bound before the body: with the queue full, a request announcing 6.5 MiB gets 429
  without sending any of it; a body still being read holds its place in the queue.
- Loopback: on ``--host ::`` (dual-stack), an IPv4 client (``::ffff:127.0.0.1``) and an IPv6 one with
  a rebinding ``Host`` are both refused.

The requests are written on raw sockets: an HTTP client sends the whole body before it reads.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import threading
import time
from typing import Any

import httpx
import pytest
from test_security import (
    CALL,
    JSON,
    AsyncGate,
    GateBackend,
    assert_openai_error,
    assert_still_serving,
    body,
    gate_process,
    post,
    serve,
    wait_for,
)

from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.cli.serve import add_serve_parser
from hammer_plugins.http_api import BackgroundServer, create_app
from hammer_plugins.http_api.guard import Guard, ip_address
from hammer_plugins.http_api.listener import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    listener_config,
)
from hammer_plugins.http_api.runner import _listener

KEY = "listener-key"
MIB = 2**20


def head(length: int | None = None, key: str | None = None, host: str = "127.0.0.1", method: str = "POST",
         path: str = "/v1/chat/completions") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    if key is not None:
        lines.append(f"Authorization: Bearer {key}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_reply(sock: socket.socket, deadline: float) -> tuple[int | None, bytes, bool]:
    """One response from ``sock``, read until it is complete (then half a second more, to see whether
    the server closes the connection) or ``deadline`` (monotonic) passes: (the status, or None when no
    response came; the bytes; whether the server closed the connection)."""
    data, closed = b"", False
    while (left := deadline - time.monotonic()) > 0:
        head_, found, rest = data.partition(b"\r\n\r\n")
        length = next((int(line.split(b":")[1]) for line in head_.lower().split(b"\r\n")
                       if line.startswith(b"content-length:")), None)
        complete = bool(found) and length is not None and len(rest) >= length
        sock.settimeout(min(left, 0.5) if complete else left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            closed = True
            break
        if not chunk:
            closed = True
            break
        data += chunk
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None
    return status, data, closed


def exchange(port: int, request: bytes, wait: float = 10.0) -> tuple[int | None, bytes, bool]:
    """``request`` sent on a fresh loopback connection, then :func:`read_reply` for at most ``wait`` s."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        with contextlib.suppress(OSError):  # the server may close before all of it is sent
            sock.sendall(request)
        return read_reply(sock, time.monotonic() + wait)


def error_code(data: bytes) -> str:
    return json.loads(data.split(b"\r\n\r\n", 1)[1])["error"]["code"]


@pytest.fixture
def gate() -> GateBackend:
    return GateBackend()


# ------------------------------------------------------------------ the size and the key, from the headers
@pytest.fixture(scope="module")
def keyed() -> Any:
    with serve(ScriptedBackend(responder=lambda prompt: CALL), api_key=KEY) as running:
        yield running


def test_a_body_without_the_key_is_refused_before_it_is_read(keyed: BackgroundServer) -> None:
    """The body announces 8 MiB (the largest allowed) and sends 4 KiB: the answer cannot wait for the rest."""
    for key, code in ((None, "missing_api_key"), ("wrong", "invalid_api_key")):
        status, data, _ = exchange(keyed.port, head(length=8 * MIB, key=key) + b"x" * 4096, wait=5)
        assert status == 401 and error_code(data) == code, data[:400]
    status, data, closed = exchange(keyed.port, head(length=8 * MIB + 1, key=KEY) + b"x" * 4096)  # over, with the key
    assert status == 413 and closed and error_code(data) == "request_too_large", data[:400]
    assert httpx.get(keyed.url + "/health").status_code == 200  # a probe needs no key
    assert_openai_error(httpx.get(keyed.base_url + "/models"), 401, "missing_api_key")
    reply = post(keyed, body(), headers={**JSON, "authorization": f"Bearer {KEY}"})
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["tool_calls"], reply.text


def rss(pid: int) -> int:
    """Resident memory of process ``pid`` in bytes (VmRSS)."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))


def stalled_bodies(port: int, count: int) -> list[socket.socket]:
    """``count`` connections without the key, each having sent an 8 MiB body but its last byte (on threads
    of their own, all at once), then stalling: returned once every sender is done."""
    sockets = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(count)]

    def stall(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):  # a server may also close the connection
            sock.sendall(head(length=8 * MIB) + b"x" * (8 * MIB - 1))

    at_once(stall, [(sock,) for sock in sockets])
    return sockets


def at_once(target: Any, arguments: list[tuple[Any, ...]]) -> None:
    """``target`` called with each of ``arguments`` on threads of their own, all at once; back when all are done."""
    threads = [threading.Thread(target=target, args=args) for args in arguments]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)


def test_twelve_stalled_unauthenticated_8_mib_bodies_hold_no_memory(tmp_path: Any) -> None:
    """The issue's measurement, on a real process: each body sent but for its last byte, then stalled."""
    with gate_process(tmp_path, api_key=KEY) as (process, url, port):
        exchange(port, head(length=10) + b"{}" * 5)  # the first refusal pays for its imports before the baseline
        before = rss(process.pid)
        sockets = stalled_bodies(port, 12)
        time.sleep(0.5)  # whatever the server was going to read, it has read
        rise = rss(process.pid) - before
        deadline = time.monotonic() + 10
        replies = [read_reply(sock, deadline) for sock in sockets]
        for sock in sockets:
            sock.close()
        print(f"12 stalled unauthenticated 8 MiB bodies: the server's RSS rose {rise / MIB:.1f} MiB "
              f"(from {before / MIB:.1f} MiB); answers {sorted(str(status) for status, _, _ in replies)}")
        assert [status for status, _, _ in replies] == [401] * 12, [data[:200] for _, data, _ in replies]
        assert rise < 20 * 10**6, rise


# ------------------------------------------------------------------ deadlines
def test_half_sent_headers_trickles_and_stalled_bodies_are_closed_at_their_deadlines() -> None:
    backend = ScriptedBackend(responder=lambda prompt: CALL)
    with BackgroundServer(create_app(HammerEngine(backend=backend)), header_timeout=1.0, body_timeout=1.0) as server:
        address = ("127.0.0.1", server.port)
        half = [socket.create_connection(address) for _ in range(40)]
        for sock in half:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
        silent = socket.create_connection(address)
        stalled = socket.create_connection(address)
        stalled.sendall(head(length=1000) + b'{"model": "hammer", ')
        kept = socket.create_connection(address)  # one answered request, then half of the next one
        kept.sendall(head(method="GET", path="/health"))
        assert read_reply(kept, time.monotonic() + 5)[0] == 200
        kept.sendall(b"GET /health HTTP/1.1\r\nHo")
        trickle = socket.create_connection(address)
        started = time.monotonic()
        trickle.sendall(b"GET /health HTTP/1.1\r\n")
        closed_at = None
        while closed_at is None and time.monotonic() - started < 5.0:  # a header byte every 0.1 s
            try:
                trickle.sendall(b"X")
                time.sleep(0.1)
                trickle.settimeout(0.001)
                if trickle.recv(65536) == b"":
                    closed_at = time.monotonic() - started
            except TimeoutError:
                continue
            except OSError:
                closed_at = time.monotonic() - started
        deadline = started + 5.0  # the deadlines are 1 s: a generous backstop, not a timing target
        replies = [read_reply(sock, deadline) for sock in (*half, silent, stalled, kept)]
        took = time.monotonic() - started
        print(f"40 half-sent headers, a silent connection, a stalled body, a kept-alive half request: all closed "
              f"{took:.2f} s after (deadlines 1 s); the trickle closed after {closed_at} s")
        for status, data, closed in replies:
            assert status == 408 and closed and error_code(data) == "request_timeout", data[:300]
        assert closed_at is not None, "a connection trickling header bytes was never closed"
        assert httpx.get(server.url + "/health").json()["reading"] == 0  # the stalled body gave its place back
        assert_still_serving(server)


def test_past_the_connection_cap_a_request_gets_503_until_a_connection_closes() -> None:
    backend = ScriptedBackend(responder=lambda prompt: CALL)
    with BackgroundServer(create_app(HammerEngine(backend=backend)), max_connections=4) as server:
        idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(4)]
        status, data, _ = exchange(server.port, head(method="GET", path="/health"), wait=5)
        assert status == 503, data[:300]
        for sock in idle:
            sock.close()
        wait_for(lambda: exchange(server.port, head(method="GET", path="/health"), wait=5)[0] == 200)
        assert_still_serving(server)


def test_the_listener_flags_reach_uvicorn_and_default_to_the_documented_values() -> None:
    parser = argparse.ArgumentParser(prog="hammer")
    add_serve_parser(parser.add_subparsers(dest="command"))
    defaults = _listener(parser.parse_args(["serve", "--openai"]))
    assert defaults == {"header_timeout": DEFAULT_HEADER_TIMEOUT, "body_timeout": DEFAULT_BODY_TIMEOUT,
                        "idle_timeout": DEFAULT_IDLE_TIMEOUT, "max_connections": DEFAULT_MAX_CONNECTIONS}
    assert (DEFAULT_HEADER_TIMEOUT, DEFAULT_BODY_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS) == (10, 30, 5, 128)
    args = parser.parse_args(["serve", "--openai", "--header-timeout", "2", "--body-timeout", "3", "--idle-timeout", "4",
                              "--max-connections", "9"])
    config = listener_config(create_app(HammerEngine(backend=ScriptedBackend([]))), "127.0.0.1", 1, **_listener(args))
    assert (config.http.header_timeout, config.http.body_timeout, config.timeout_keep_alive,
            config.limit_concurrency, config.ws) == (2.0, 3.0, 4, 9, "none")


# ------------------------------------------------------------------ the queue's bound before the body
def flood(port: int, payload: bytes, clients: int, headers: bytes | None = None) -> list[tuple[int | None, float]]:
    """``clients`` connections at once, each sending ``payload`` as a request body on a thread of its own
    while its answer is read: (the status, seconds from the start of its sending to the answer) each."""
    answers: list[tuple[int | None, float]] = []

    def one() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
            started = time.perf_counter()

            def send() -> None:
                with contextlib.suppress(OSError):
                    sock.sendall((headers or head(length=len(payload))) + payload)

            sender = threading.Thread(target=send)
            sender.start()
            status = read_reply(sock, time.monotonic() + 60)[0]
            answers.append((status, time.perf_counter() - started))
            sender.join(timeout=60)

    at_once(one, [()] * clients)
    return answers


def test_a_full_queue_refuses_large_bodies_before_reading_any(gate: GateBackend) -> None:
    with serve(gate, queue_per_slot=1) as server:
        answers: list[int] = []
        held = [threading.Thread(target=lambda: answers.append(post(server, body("HOLD"), timeout=60).status_code))
                for _ in range(2)]  # one running, one waiting: the queue is full
        for thread in held:
            thread.start()
        wait_for(lambda: (lambda h: (h["running"], h["waiting"]))(httpx.get(server.url + "/health").json()) == (1, 1))
        large = json.dumps(body("x" * (13 * MIB // 2))).encode()  # 6.5 MiB
        for _ in range(3):  # announced, never sent: the answer cannot wait for the body
            status, data, _ = exchange(server.port, head(length=len(large)), wait=5)
            assert status == 429 and b"retry-after" in data.lower(), data[:300]
        answers_at = flood(server.port, large, 12)
        print(f"12 bodies of 6.5 MiB sent at once with the queue full: each answered "
              f"{sorted({status for status, _ in answers_at})} within {max(t for _, t in answers_at):.3f} s of its "
              "headers, while its body was still being sent")
        assert [status for status, _ in answers_at] == [429] * 12
        health = httpx.get(server.url + "/health").json()
        assert health["refused"] == 15 and health["reading"] == 0
        gate.gate.set()
        for thread in held:
            thread.join(timeout=30)
        assert answers == [200, 200]
        assert_still_serving(server)


@pytest.mark.parametrize("kind", [GateBackend, AsyncGate], ids=["in process", "native async (llama-server's path)"])
def test_a_body_being_read_holds_its_place_in_the_queue(kind: type[GateBackend]) -> None:
    with serve(kind(), queue_per_slot=0) as server:  # one place: the slot
        payload = json.dumps(body()).encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as slow:
            slow.sendall(head(length=len(payload)) + payload[:10])
            wait_for(lambda: httpx.get(server.url + "/health").json()["reading"] == 1)
            assert_openai_error(post(server, body()), 429, "rate_limit_exceeded")
            slow.sendall(payload[10:])
            status, data, _ = read_reply(slow, time.monotonic() + 10)
            assert status == 200 and b"get_weather" in data, data[:300]
        assert httpx.get(server.url + "/health").json()["reading"] == 0
        assert_still_serving(server)


# ------------------------------------------------------------------ loopback means loopback
@pytest.mark.parametrize("local", ["127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1", "::ffff:7f00:1", "::1%lo",
                                   "::ffff:127.0.0.1%lo", "0:0:0:0:0:ffff:7f00:0001"])
def test_every_form_of_a_loopback_address_gets_the_host_check(local: str) -> None:
    guard = Guard(lambda scope, receive, send: None)
    assert ip_address(local) is not None and ip_address(local).is_loopback  # type: ignore[union-attr]
    assert not guard.host_allowed({"server": (local, 8080)}, "rebind.evil.example")
    assert guard.host_allowed({"server": (local, 8080)}, "localhost:8080")
    assert guard.host_allowed({"server": (local, 8080)}, "[::ffff:127.0.0.1]:8080")  # an IP literal: not a page's name


def test_a_dual_stack_host_refuses_rebinding_from_ipv4_and_ipv6_clients(tmp_path: Any) -> None:
    """``--host ::`` on a real process: IPv4 clients reach it (as ``::ffff:127.0.0.1``), and the Host check holds."""
    with gate_process(tmp_path, host="::") as (_, _, port):
        for client in ("127.0.0.1", "[::1]"):
            url = f"http://{client}:{port}/v1/chat/completions"
            rebound = httpx.post(url, headers={**JSON, "host": f"rebind.evil.example:{port}"}, json=body(), timeout=10)
            assert_openai_error(rebound, 403, "host_not_allowed")
            local = httpx.post(url, headers=JSON, json=body(), timeout=10)
            assert local.status_code == 200 and local.json()["choices"][0]["message"]["tool_calls"], local.text
