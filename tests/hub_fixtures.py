"""A local Hugging Face cache laid out exactly as ``huggingface_hub`` writes it, and a hub on loopback.

No test reaches outside this machine: the cache is seeded from local files, and the "hub" is an
HTTP server on 127.0.0.1 that answers the requests ``hf_hub_download`` makes (``HEAD`` and ``GET``
of ``/<repo>/resolve/<revision>/<file>``, with the headers the real hub sends, and ``Range``).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def seed_cache(cache: Path, repo: str, files: dict[str, Path], commit: str = COMMIT) -> Path:
    """``models--owner--name/{refs/main, blobs/<etag>, snapshots/<commit>/<file>}``, blobs linked to ``files``.

    Blobs are symlinks to the given files (never copies of a 491 MB model); snapshot entries are
    relative symlinks to the blobs, as the hub client makes them. Returns the snapshot folder.
    """
    root = cache / f"models--{repo.replace('/', '--')}"
    (root / "refs").mkdir(parents=True, exist_ok=True)
    (root / "refs" / "main").write_text(commit)
    snapshot = root / "snapshots" / commit
    for name, source in files.items():
        etag = hashlib.sha256(f"{repo}/{name}".encode()).hexdigest()
        blob = root / "blobs" / etag
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists():
            blob.symlink_to(source.resolve())
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            link.symlink_to(Path("../" * (len(Path(name).parts) + 1)) / "blobs" / etag)
    return snapshot


class HubState:
    """What the loopback hub serves and what it was asked."""

    def __init__(self, files: dict[str, bytes], cut_after: int | None = None) -> None:
        self.files = files  # "owner/repo/file" -> content
        self.cut_after = cut_after  # drop the connection after this many bytes of a full GET (once)
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range header)


def _handler(state: HubState) -> type[BaseHTTPRequestHandler]:
    class Hub(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _find(self) -> tuple[str, bytes] | None:
            # /<owner>/<repo>/resolve/<revision>/<file>
            parts = self.path.split("?")[0].strip("/").split("/")
            if len(parts) < 5 or parts[2] != "resolve":
                return None
            key = "/".join(parts[:2] + parts[4:])
            return (key, state.files[key]) if key in state.files else None

        def _headers(self, key: str, body: bytes, status: int, length: int) -> None:
            self.send_response(status)
            etag = hashlib.sha256(body).hexdigest()
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", f'"{etag}"')
            self.send_header("X-Linked-Etag", f'"{etag}"')
            self.send_header("X-Linked-Size", str(len(body)))
            self.send_header("Content-Length", str(length))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()

        def do_HEAD(self) -> None:  # noqa: N802 - the http.server API
            state.requests.append(("HEAD", self.path, self.headers.get("Range")))
            found = self._find()
            if found is None:
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.end_headers()
                return
            self._headers(found[0], found[1], 200, len(found[1]))

        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            wanted = self.headers.get("Range")
            state.requests.append(("GET", self.path, wanted))
            found = self._find()
            if found is None:
                self.send_response(404)
                self.end_headers()
                return
            key, body = found
            start = int(wanted.split("=")[1].split("-")[0]) if wanted else 0
            part = body[start:]
            self._headers(key, body, 206 if wanted else 200, len(part))
            if state.cut_after is not None and not wanted:
                cut, state.cut_after = state.cut_after, None
                self.wfile.write(part[:cut])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(2)  # a dropped download, mid-file
                return
            self.wfile.write(part)

    return Hub


@contextmanager
def loopback_hub(state: HubState) -> Iterator[str]:
    """A fake hub on 127.0.0.1; yields its endpoint URL."""
    with serve_on_loopback(_handler(state)) as url:
        yield url


@contextmanager
def serve_on_loopback(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """An HTTP server on 127.0.0.1 (a free port) answering with ``handler``; yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
