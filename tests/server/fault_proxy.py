"""A loopback HTTP proxy in front of the real test server that injects scripted faults.

Real servers do not answer 503 or cut a stream on demand; a load balancer in front of one does
both. Each ``/v1/completions`` request takes the next scripted action: ``("status", code, headers)``
answers with that HTTP error, ``("cut", n)`` forwards the stream but drops the connection after
``n`` events (no chunked-encoding terminator, as a crashed proxy would), ``("stall", seconds)``
answers nothing for that long, then drops the connection, ``("pass",)`` forwards.
With the script empty, everything is forwarded. Every completion request body is recorded.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

Action = tuple[Any, ...]
_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class FaultProxy:
    """Start with ``with FaultProxy(upstream) as proxy:``; point the backend at ``proxy.base_url``."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.script: list[Action] = []
        self.completion_bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                return None

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                proxy.handle(self, b"")

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                proxy.handle(self, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def completion_requests(self) -> int:
        return len(self.completion_bodies)

    def __enter__(self) -> FaultProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        action: Action = ("pass",)
        if handler.path.startswith("/v1/completions"):
            with self.lock:
                self.completion_bodies.append(json.loads(body or b"{}"))
                if self.script:
                    action = self.script.pop(0)
        if action[0] == "stall":
            time.sleep(action[1])
            handler.close_connection = True
            return
        if action[0] == "status":
            code, headers = action[1], action[2] if len(action) > 2 else {}
            payload = json.dumps({"error": {"message": f"injected HTTP {code}", "type": "injected", "code": code}}).encode()
            handler.send_response(code)
            for key, value in headers.items():
                handler.send_header(key, value)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
            return
        self.forward(handler, body, cut_after=action[1] if action[0] == "cut" else None)

    def forward(self, handler: BaseHTTPRequestHandler, body: bytes, cut_after: int | None) -> None:
        conn = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=600)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_HEADERS}
        conn.request(handler.command, handler.path, body=body or None, headers=headers)
        upstream = conn.getresponse()
        handler.send_response(upstream.status)
        for key, value in upstream.getheaders():
            if key.lower() not in _HOP_HEADERS:
                handler.send_header(key, value)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        buffer = b""
        events = 0
        try:
            while True:
                data = upstream.read1(65536)
                if not data:
                    break
                if cut_after is None:
                    self._chunk(handler, data)
                    continue
                buffer += data
                while b"\n\n" in buffer and events < cut_after:
                    event, buffer = buffer.split(b"\n\n", 1)
                    self._chunk(handler, event + b"\n\n")
                    events += 1
                if events >= cut_after:
                    # Drop the connection mid-body: no terminating chunk, as when a proxy dies.
                    handler.connection.shutdown(socket.SHUT_RDWR)
                    return
            handler.wfile.write(b"0\r\n\r\n")
        finally:
            conn.close()

    @staticmethod
    def _chunk(handler: BaseHTTPRequestHandler, data: bytes) -> None:
        handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        handler.wfile.flush()
