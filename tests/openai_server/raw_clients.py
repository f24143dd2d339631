"""A client that misbehaves below HTTP libraries: a streaming request from a raw socket that never reads
its answer (issue 37, class 3). Kept apart from openai_server_helpers so a launcher that puts only this
directory on the path can import the test modules that use it."""

from __future__ import annotations

import json
import socket
from typing import Any
from urllib.parse import urlsplit


def never_reading(url: str, payload: dict[str, Any], headers: dict[str, str] | None = None) -> socket.socket:
    """POST ``payload`` as a streaming chat completion to the server at ``url`` from a raw socket that then
    reads nothing: its receive buffer is made small (SO_RCVBUF, set before connecting, so the window it
    offers stays small), so the server's sends fill the buffers and then wait. The caller closes it."""
    parts = urlsplit(url)
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.connect((parts.hostname, parts.port))
    body = json.dumps({**payload, "stream": True}).encode()
    lines = ["POST /v1/chat/completions HTTP/1.1", f"Host: {parts.hostname}:{parts.port}", "Content-Type: application/json",
             f"Content-Length: {len(body)}", *(f"{name}: {value}" for name, value in (headers or {}).items()), "", ""]
    client.sendall("\r\n".join(lines).encode() + body)
    return client
