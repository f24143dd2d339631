"""A cache folder that is the user's own: created 0700, refused when someone else could write to it.

An on-disk cache is only as trustworthy as the folder it lives in. A folder that another local user
owns, or that the group or others can write (``HAMMER_PREFIX_CACHE_DIR=/tmp/kv`` made 0777 by someone
else), lets that user plant entries, symlinks or FIFOs where the cache reads. This module holds the
rules once, for every cache of the package that keeps files on disk:

- :class:`PrivateFolder`: the folder is created ``0700``; an existing one must be a directory owned by
  this user and not writable by group or others, else it is refused (a warning, once per folder and
  process) and the cache runs without it. One of ours that others may read is tightened to ``0700``
  (the old default was ``0755``; a prompt's KV state tells what the prompt said).
- :meth:`PrivateFolder.read`: an entry is opened with ``O_NOFOLLOW | O_NONBLOCK`` and read only when
  ``fstat`` says it is a regular file, so a symlink, a FIFO or a device is a miss, never a hang or a
  read of another file.
- :meth:`PrivateFolder.key`: a random per-folder key kept in a ``0600`` file, for an HMAC over each
  entry: whoever can compute an entry's content offline (a KV state from the public model) still
  cannot write one this cache accepts without the key.

On a system without POSIX users (Windows) the owner and mode checks are skipped; the rest holds.

Example:
    >>> import os, stat, tempfile
    >>> folder = PrivateFolder(os.path.join(tempfile.mkdtemp(), "cache"))
    >>> folder.ensure() and stat.S_IMODE(os.stat(folder.path).st_mode) == 0o700
    True
    >>> os.mkfifo(folder.path / "entry")       # planted: read is a miss, not a blocked open()
    >>> folder.read(folder.path / "entry") is None
    True
    >>> len(folder.key()) == 32 and folder.key() == PrivateFolder(folder.path).key()
    True
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import tempfile
from pathlib import Path

log = logging.getLogger("hammer_plugins")

KEY_FILE = ".key"
"""The per-folder HMAC key's file name (32 random bytes, mode 0600)."""

KEY_BYTES = 32

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_WARNED: set[str] = set()  # folders refused in this process: one warning each, not one per request


def _uid() -> int | None:
    """This process's effective user id, or None where there are no POSIX users."""
    geteuid = getattr(os, "geteuid", None)
    return geteuid() if geteuid is not None else None


def folder_problem(path: Path) -> str | None:
    """Why the existing folder ``path`` may not hold a cache (None: it may).

    Example:
        >>> import tempfile
        >>> folder_problem(Path(tempfile.mkdtemp())) is None
        True
    """
    try:
        info = os.stat(path)  # a symlinked folder (~/.cache on another disk) is judged by what it points to
    except OSError as exc:
        return f"cannot stat it ({exc.strerror})"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a folder"
    uid = _uid()
    if uid is None:
        return None
    if info.st_uid != uid:
        return f"it is owned by uid {info.st_uid}, not by this user (uid {uid})"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"its group or other users can write to it (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


class PrivateFolder:
    """A folder for a cache that only its user can write; see the module docstring.

    ``ensure()`` creates or checks it once per instance (never raises); ``read()`` reads a regular
    file in it or gives None; ``key()`` is its HMAC key.

    Example:
        >>> import os, tempfile
        >>> shared = tempfile.mkdtemp(); os.chmod(shared, 0o777)
        >>> PrivateFolder(shared).ensure()        # others can write it: refused, with a warning
        False
        >>> os.chmod(shared, 0o755); PrivateFolder(shared).ensure(), oct(os.stat(shared).st_mode & 0o777)
        (True, '0o700')
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        self._usable: bool | None = None
        self._key: bytes | None = None

    def ensure(self) -> bool:
        """Create the folder ``0700`` (parents as the umask says) or check the one there; False when refused.

        Refused: not a folder, owned by another user, or writable by group or others (a warning says
        which, once per folder). A folder of ours that others may read is tightened to ``0700``. A folder
        that cannot be created (a read-only disk) is False without a warning: the cache only saves time.
        """
        if self._usable is not None:
            return self._usable
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError:
            self._usable = False
            return False
        problem = folder_problem(self.path)
        if problem is not None:
            self._refuse(problem)
            return False
        try:
            mode = stat.S_IMODE(os.stat(self.path).st_mode)
            if _uid() is not None and mode & 0o077:
                os.chmod(self.path, mode & 0o700)  # ours but readable by others: a KV state tells what a prompt said
        except OSError:
            pass
        self._usable = True
        return True

    def _refuse(self, problem: str) -> None:
        self._usable = False
        if str(self.path) not in _WARNED:
            _WARNED.add(str(self.path))
            log.warning("not using the cache folder %s: %s; running without it. Fix: point the cache at a folder "
                        "of your own (mode 0700), or remove this one.", self.path, problem)

    def read(self, path: str | Path, limit: int = -1) -> bytes | None:
        """The bytes of the regular file ``path`` in this folder (its first ``limit`` bytes when given), or None:
        missing, a symlink, a FIFO, a device, a folder, or the folder itself refused. Opened without following a
        final symlink and without blocking, then checked with ``fstat`` before a byte is read.

        Example:
            >>> import tempfile
            >>> folder = PrivateFolder(tempfile.mkdtemp())
            >>> (folder.path / "a").write_bytes(b"x"); (folder.path / "b").symlink_to(folder.path / "a")
            1
            >>> folder.read(folder.path / "a"), folder.read(folder.path / "b")
            (b'x', None)
        """
        if not self.ensure():
            return None
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except OSError:  # missing; ELOOP for a symlink; ENXIO for a FIFO opened without a writer
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return None
            with os.fdopen(fd, "rb", closefd=False) as stream:
                return stream.read(limit)
        except OSError:
            return None
        finally:
            os.close(fd)

    def key(self) -> bytes | None:
        """This folder's HMAC key (made on first use: 32 random bytes in a ``0600`` file), or None when the
        folder is refused or the key can be neither read nor made.

        Two processes making it at once agree: each writes a temporary file and links it into place, and
        the one that finds a key there already reads that one. A key file that is not a regular file of this
        user's, mode ``0600``, of 32 bytes, is replaced (every entry keyed with the old one then misses).
        """
        if self._key is not None:
            return self._key
        if not self.ensure():
            return None
        where = self.path / KEY_FILE
        for _ in range(3):
            found = self._read_key(where)
            if found is not None:
                self._key = found
                return found
            try:
                fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".partial-", suffix=".key")  # created 0600
                try:
                    with os.fdopen(fd, "wb") as out:
                        out.write(secrets.token_bytes(KEY_BYTES))
                    if os.path.lexists(where) and self._read_key(where) is None:
                        os.unlink(where)  # not a key of ours (a FIFO, a symlink, the wrong size): replaced
                    os.link(tmp, where)  # fails when another process linked its key first: read that one
                except FileExistsError:
                    pass
                finally:
                    Path(tmp).unlink(missing_ok=True)
            except OSError:
                return None
        return None

    def _read_key(self, where: Path) -> bytes | None:
        try:
            fd = os.open(where, _OPEN_FLAGS)
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            uid = _uid()
            if (not stat.S_ISREG(info.st_mode) or info.st_size != KEY_BYTES
                    or (uid is not None and (info.st_uid != uid or info.st_mode & 0o077))):
                return None
            data = os.read(fd, KEY_BYTES + 1)
            return data if len(data) == KEY_BYTES else None
        except OSError:
            return None
        finally:
            os.close(fd)
