"""KV states of prompt prefixes kept on disk, so a new process skips the prompt it evaluated before.

Every ``hammer call`` with the same tools starts with the same ~600 prompt tokens (the system turn
and the tools block). Evaluating them is most of a cold call on a CPU; their KV state is a few
megabytes. The store keeps one file per (runtime, prefix tokens):

- **keyed** by a runtime description (the model file's content, as a SHA-256 computed once and remembered
  by its inode, size and times (:meth:`PrefixCache.file_digest`); the runtime's version and
  the context settings that shape the KV layout) and the exact prefix token ids, so a changed model
  (even one written over the same path with the same size and time), runtime or tool set can never load
  a stale state: it just misses;
- **checked** on load: a header, the token ids and an HMAC-SHA-256 of the runtime, tokens and payload
  must match, or the file is deleted and the caller evaluates as if nothing were cached. The HMAC's key
  is the folder's own random key (:meth:`PrivateFolder.key <hammer_plugins.support.private_folder.
  PrivateFolder.key>`, a ``0600`` file): a KV state anyone can compute offline from the public model is
  still no entry without it;
- **private**: the folder is created ``0700``; one owned by another user or writable by group or others is
  refused with a warning and the backend runs without the disk cache; an entry is read only if it is a
  regular file (``O_NOFOLLOW | O_NONBLOCK``, then ``fstat``), so a planted symlink, FIFO or device is a
  miss, never a hang (:mod:`hammer_plugins.support.private_folder`);
- **safe with concurrent processes and interrupts**: files are written to a temporary name and
  renamed into place, so a reader sees a whole file or none; a file removed while another process
  reads it stays readable to that reader; a write interrupted (Ctrl-C) removes its temporary file,
  and one a killed process left is removed by a later store after ten minutes;
- **bounded, and held against churn**: a prefix stored for the first time is *on trial*; it is kept for good
  once it is used again (loaded, or found in the context by a later request: :meth:`PrefixCache.mark_reused`,
  remembered in ``reused.json``). States on trial hold at most :data:`TRIAL_SHARE` of ``max_bytes``, the oldest
  going first, so a flood of one-off system prompts (36.7 MB each for 1.6k tokens) churns only them and never
  evicts a prefix that was reused; past ``max_bytes`` the oldest on trial go first, then the least recently used.

Beside the states, a sub-store (:meth:`PrefixCache.vocabularies`) keeps what a model needs at every
start whatever the tools: llguidance's reading of its tokenizer vocabulary, 0.5 s of CPU for a
152k-token vocabulary that would otherwise compete with prompt evaluation. It is kept apart so that
states never evict it and a new tool set on a known model still finds it.

A second sub-store (:meth:`PrefixCache.prompts`) keeps the states of whole prompts that paid off: a prefix that
served a later request from memory is likely to begin the next process's requests too (an agent's new session
repeats the first request of the one before). A restarted server restores the longest of them that begins its
prompt (:meth:`PrefixCache.longest`); they are bounded apart, so they never evict the tools prefixes.

Its location is ``$HAMMER_PREFIX_CACHE_DIR`` if set, else ``$HAMMER_CACHE_DIR/prefix-kv`` (default
``~/.cache/hammer-plugins/prefix-kv``); ``hammer cache clear`` or deleting the folder empties all three.

Example:
    >>> import tempfile
    >>> cache = PrefixCache(tempfile.mkdtemp())
    >>> cache.store("model.gguf|llama.cpp 0.3", [1, 2, 3], b"kv-bytes")
    >>> cache.load("model.gguf|llama.cpp 0.3", [1, 2, 3])
    b'kv-bytes'
    >>> cache.load("model.gguf|llama.cpp 0.4", [1, 2, 3]) is None   # another runtime: a miss
    True
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import tempfile
import time
from array import array
from collections.abc import Sequence
from pathlib import Path

from hammer_plugins.backends.file_digests import file_digest
from hammer_plugins.support.cache_location import cache_dir
from hammer_plugins.support.private_folder import PrivateFolder

_MAGIC = b"HAMMER-KV 2\n"  # 2: an HMAC under the folder's key (1's plain SHA-256 files are misses)
_VOCABULARIES = "vocabularies"
_PROMPTS = "prompts"
DEFAULT_MAX_BYTES = 1 << 30
_REUSED_INDEX = "reused.json"
_REUSED_ENTRIES = 4096
TRIAL_SHARE = 0.25
"""The share of ``max_bytes`` that states stored once and never reused may hold together."""

# A store takes milliseconds: a temporary file this old belongs to a process killed mid-write (SIGKILL).
_STALE_PARTIAL_SECONDS = 600


def default_prefix_cache_dir() -> Path:
    """``$HAMMER_PREFIX_CACHE_DIR``, else ``$HAMMER_CACHE_DIR/prefix-kv`` (``~/.cache/hammer-plugins/prefix-kv``)."""
    if os.environ.get("HAMMER_PREFIX_CACHE_DIR"):
        return Path(os.environ["HAMMER_PREFIX_CACHE_DIR"]).expanduser()
    return cache_dir() / "prefix-kv"


def _token_bytes(tokens: Sequence[int]) -> bytes:
    return array("i", tokens).tobytes()


def _mac(key: bytes, runtime: str, tokens: Sequence[int], state: bytes) -> str:
    """The entry's check: an HMAC-SHA-256 under the folder's key over everything the entry stands for, so an
    entry cannot be written, nor moved to another runtime's or tokens' name, without the key."""
    message = runtime.encode("utf-8") + b"\0" + len(tokens).to_bytes(8, "little") + _token_bytes(tokens) + state
    return hmac.new(key, message, hashlib.sha256).hexdigest()


class PrefixCache:
    """A bounded on-disk store of runtime states, one file per (runtime, prefix tokens); see the module docstring.

    Example:
        >>> import tempfile
        >>> cache = PrefixCache(tempfile.mkdtemp(), max_bytes=10_000)
        >>> cache.store("rt", [5, 6], b"x" * 4000); cache.store("rt", [7], b"y" * 4000)
        >>> cache.store("rt", [8], b"z" * 4000)   # never reused, over their share: the oldest went
        >>> cache.load("rt", [5, 6]) is None, cache.load("rt", [8]) is not None
        (True, True)
    """

    def __init__(self, directory: str | Path | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.directory = Path(directory) if directory is not None else default_prefix_cache_dir()
        self.max_bytes = max_bytes
        self.folder = PrivateFolder(self.directory)
        self._reused_seen: set[str] = set()  # entries this process marked reused already

    @property
    def usable(self) -> bool:
        """Whether the folder is this user's own (created ``0700`` if missing); False: every load misses and
        nothing is stored (a warning said why)."""
        return self.folder.ensure()

    def path_for(self, runtime: str, tokens: Sequence[int]) -> Path:
        """The file that holds (or would hold) the state of ``tokens`` under ``runtime``."""
        digest = hashlib.sha256(runtime.encode("utf-8") + b"\0" + _token_bytes(tokens)).hexdigest()
        return self.directory / f"{digest[:40]}.kv"

    def load(self, runtime: str, tokens: Sequence[int]) -> bytes | None:
        """The stored state, or ``None`` (a miss, or a damaged file, which is removed)."""
        path = self.path_for(runtime, tokens)
        blob = self.folder.read(path)  # a symlink, FIFO or device is None here, before any read could block
        key = self.folder.key() if blob is not None else None
        if blob is None or key is None:
            return None
        state = self._unpack(blob, runtime, tokens, key)
        if state is None:
            path.unlink(missing_ok=True)
            return None
        try:
            os.utime(path)  # recently used: evicted last
        except OSError:
            pass
        self.mark_reused(runtime, tokens)
        return state

    def mark_reused(self, runtime: str, tokens: Sequence[int]) -> None:
        """Say that the stored state of ``tokens`` served a second request: it leaves its trial and is evicted only
        by the bound, least recently used first. Nothing is kept for a state not stored; never raises."""
        path = self.path_for(runtime, tokens)
        if path.name in self._reused_seen or not path.is_file():
            return
        names = self._reused_names()
        if path.name not in names:
            alive = {p.name for p, _, _ in self._files()}
            kept = [n for n in names if n in alive][-(_REUSED_ENTRIES - 1):]
            try:
                fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".partial-", suffix=".json")  # created 0600
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump([*kept, path.name], out)
                os.replace(tmp, self.directory / _REUSED_INDEX)
            except OSError:
                return
        self._reused_seen.add(path.name)

    def _reused_names(self) -> list[str]:
        raw = self.folder.read(self.directory / _REUSED_INDEX)  # a FIFO here is None, never a hang
        try:
            names = json.loads(raw.decode("utf-8")) if raw is not None else []
        except ValueError:
            return []
        return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []

    def file_digest(self, path: str | Path) -> str:
        """The SHA-256 of the file at ``path``, read once (:func:`~hammer_plugins.backends.file_digests.file_digest`:
        remembered in this process and in this folder)."""
        return file_digest(self.folder, self.directory, self.usable, path)

    def discard(self, runtime: str, tokens: Sequence[int]) -> None:
        """Remove what is kept for ``tokens`` (a state its reader found unusable); never raises."""
        self.path_for(runtime, tokens).unlink(missing_ok=True)

    def store(self, runtime: str, tokens: Sequence[int], state: bytes) -> None:
        """Keep ``state`` for ``tokens``; never raises for a full or read-only disk (the cache is an optimization)."""
        key = self.folder.key()  # None: the folder is refused (or unwritable), and nothing is kept
        if key is None:
            return
        header = json.dumps({"runtime": runtime, "n_tokens": len(tokens),
                             "hmac": _mac(key, runtime, tokens, state)}).encode("utf-8") + b"\n"
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".partial-", suffix=".kv")
            try:
                with os.fdopen(fd, "wb") as out:
                    out.write(_MAGIC + header + _token_bytes(tokens) + state)
                os.replace(tmp, self.path_for(runtime, tokens))
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            self._evict()
        except OSError:
            return

    def vocabularies(self) -> PrefixCache:
        """The sub-store for per-model data (a tokenizer's vocabulary), bounded apart from the states.

        Example:
            >>> import tempfile
            >>> cache = PrefixCache(tempfile.mkdtemp())
            >>> cache.vocabularies().store("model.gguf|vocabulary", [0], b"tokens")
            >>> cache.clear(keep_vocabularies=True), cache.vocabularies().load("model.gguf|vocabulary", [0])
            (0, b'tokens')
        """
        return PrefixCache(self.directory / _VOCABULARIES, max_bytes=self.max_bytes)

    def size(self) -> int:
        """Bytes in the store, vocabularies included."""
        own = sum(size for _, size, _ in self._files())
        return (own + (self.vocabularies().size() if self._has_vocabularies() else 0)
                + (self.prompts().size() if (self.directory / _PROMPTS).is_dir() else 0))

    def clear(self, keep_vocabularies: bool = False) -> int:
        """Delete every stored state (and the vocabularies unless kept); the number of files removed."""
        if not self.usable:  # another user's folder: not ours to empty
            return 0
        files = self._files()
        for path, _, _ in files:
            path.unlink(missing_ok=True)
        self._remove_stale_partials()
        removed = len(files)
        if (self.directory / _PROMPTS).is_dir():
            removed += self.prompts().clear()
        if not keep_vocabularies and self._has_vocabularies():
            removed += self.vocabularies().clear()
        return removed

    def prompts(self) -> PrefixCache:
        """The sub-store for the states of whole prompts that paid off (:mod:`~hammer_plugins.backends.prompt_states`
        keeps them in memory; these outlive the process), bounded apart from the tools prefixes: looked up by
        :meth:`longest`, and a stored prompt removes the ones it extends (:meth:`store_extending`).

        Example:
            >>> import tempfile
            >>> prompts = PrefixCache(tempfile.mkdtemp()).prompts()
            >>> prompts.store_extending("rt", [1, 2, 3], b"kv"); prompts.store_extending("rt", [1, 2, 3, 4], b"kv2")
            >>> prompts.longest("rt", [1, 2, 3, 4, 5]), prompts.load("rt", [1, 2, 3]) is None   # the shorter went
            (([1, 2, 3, 4], 4), True)
        """
        return PrefixCache(self.directory / _PROMPTS, max_bytes=self.max_bytes)

    def longest(self, runtime: str, tokens: Sequence[int]) -> tuple[list[int], int]:
        """The stored token sequence under ``runtime`` that shares the most leading tokens with ``tokens``, and
        how many (``([], 0)``: none shares any). Reads each file's header and token ids, not its state; the state's
        check is :meth:`load`'s, so a damaged or forged file found here is still a miss there.

        Example:
            >>> import tempfile
            >>> cache = PrefixCache(tempfile.mkdtemp())
            >>> cache.store("rt", [1, 2, 3], b"a"); cache.store("rt", [1, 9], b"b"); cache.store("other", [1, 2, 3, 4], b"c")
            >>> cache.longest("rt", [1, 2, 7]), cache.longest("rt", [5])
            (([1, 2, 3], 2), ([], 0))
        """
        from hammer_plugins.backends.prompt_states import shared_prefix

        best: tuple[list[int], int] = ([], 0)
        for path, _, _ in self._files():
            head = self._head(path)
            if head is None or head[0] != runtime:
                continue
            n = shared_prefix(head[1], tokens)
            if n > best[1]:
                best = (head[1], n)
        return best

    def store_extending(self, runtime: str, tokens: Sequence[int], state: bytes) -> None:
        """:meth:`store`, then remove the entries under ``runtime`` whose tokens begin ``tokens``: the new state
        serves every prompt they would (one state per line of a conversation, not one per turn)."""
        self.store(runtime, tokens, state)
        for path, _, _ in self._files():
            head = self._head(path)
            if head is not None and head[0] == runtime and len(head[1]) < len(tokens) \
                    and list(tokens[:len(head[1])]) == head[1]:
                path.unlink(missing_ok=True)

    def _head(self, path: Path) -> tuple[str, list[int]] | None:
        """An entry's runtime and token ids, read from its header alone (None: not an entry of this format)."""
        start = self.folder.read(path, limit=4096)
        if start is None or not start.startswith(_MAGIC) or (end := start.find(b"\n", len(_MAGIC))) < 0:
            return None
        try:
            header = json.loads(start[len(_MAGIC):end])
        except ValueError:
            return None
        n = header.get("n_tokens") if isinstance(header, dict) else None
        if not isinstance(n, int) or n < 0 or not isinstance(header.get("runtime"), str):
            return None
        blob = self.folder.read(path, limit=end + 1 + 4 * n)
        if blob is None or len(blob) < end + 1 + 4 * n:
            return None
        ids = array("i")
        ids.frombytes(blob[end + 1:])
        return header["runtime"], ids.tolist()

    def _has_vocabularies(self) -> bool:
        return (self.directory / _VOCABULARIES).is_dir()

    # ----------------------------------------------------------------- internals
    @staticmethod
    def _unpack(blob: bytes, runtime: str, tokens: Sequence[int], key: bytes) -> bytes | None:
        if not blob.startswith(_MAGIC):
            return None
        end = blob.find(b"\n", len(_MAGIC))
        if end < 0:
            return None
        try:
            header = json.loads(blob[len(_MAGIC):end])
        except ValueError:
            return None
        if not isinstance(header, dict):  # valid JSON of another shape (null, [], 1): damaged all the same
            return None
        body = blob[end + 1:]
        expected = _token_bytes(tokens)
        if (header.get("runtime") != runtime or header.get("n_tokens") != len(tokens)
                or body[:len(expected)] != expected):
            return None
        state = body[len(expected):]
        mac = header.get("hmac")
        return state if isinstance(mac, str) and hmac.compare_digest(mac, _mac(key, runtime, tokens, state)) else None

    def _files(self) -> list[tuple[Path, int, float]]:
        out = []
        try:
            entries = list(os.scandir(self.directory))
        except OSError:
            return []
        for entry in entries:
            if entry.name.endswith(".kv") and not entry.name.startswith(".partial-"):
                try:
                    stat = entry.stat(follow_symlinks=False)  # a symlink's own size, never its target's
                except OSError:
                    continue
                out.append((Path(entry.path), stat.st_size, stat.st_mtime))
        return out

    def _remove_stale_partials(self) -> None:
        """Remove temporary files a killed process left (an interrupted store removes its own at once)."""
        cutoff = time.time() - _STALE_PARTIAL_SECONDS
        try:
            entries = [e for e in os.scandir(self.directory) if e.name.startswith(".partial-")]
        except OSError:
            return
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_mtime < cutoff:
                    os.unlink(entry.path)
            except OSError:
                continue

    def _evict(self) -> None:
        self._remove_stale_partials()
        files = sorted(self._files(), key=lambda f: f[2])  # least recently used first
        reused = set(self._reused_names())
        trial = [f for f in files if f[0].name not in reused]
        kept = [f for f in files if f[0].name in reused]
        total = sum(size for _, size, _ in files)
        on_trial = sum(size for _, size, _ in trial)
        # The newest state on trial stays, whatever its size: it was stored for the next request.
        for path, size, _ in trial[:-1]:
            if on_trial <= self.max_bytes * TRIAL_SHARE and total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total, on_trial = total - size, on_trial - size
        for path, size, _ in [*kept, *trial[-1:]]:
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
