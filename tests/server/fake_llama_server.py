"""A stand-in for the ``llama-server`` binary, for launcher tests that need no model.

Takes llama-server's ``--port`` (other flags are ignored) and answers ``/health`` and ``/v1/models``
with 200. ``--spam BYTES`` prints that many bytes of log first and then keeps printing;
``--exit-after SECONDS`` exits with code 3 that long after it started listening; ``--dump-env FILE``
writes its environment to FILE as JSON.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _arg(name: str, default: str | None = None) -> str | None:
    argv = sys.argv[1:]
    return argv[argv.index(name) + 1] if name in argv else default


class Handler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        return None

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        body = json.dumps({"status": "ok", "data": [{"id": "hammer", "owned_by": "llamacpp"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main() -> None:
    port = int(_arg("--port", "0") or 0)
    if dump := _arg("--dump-env"):
        with open(dump, "w", encoding="utf-8") as handle:
            json.dump(dict(os.environ), handle)
    spam = int(_arg("--spam", "0") or 0)
    line = b"x" * 99 + b"\n"
    for _ in range(spam // len(line)):
        sys.stdout.buffer.write(line)
    print(f"fake llama-server listening on {port}", flush=True)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    exit_after = _arg("--exit-after")
    started = time.monotonic()
    while True:
        if spam:
            sys.stdout.buffer.write(line * 100)
            sys.stdout.flush()
        if exit_after is not None and time.monotonic() - started > float(exit_after):
            print("fake llama-server exits with code 3", flush=True)
            os._exit(3)
        time.sleep(0.01)


if __name__ == "__main__":
    main()
