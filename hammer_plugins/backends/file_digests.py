"""The SHA-256 of a model file, read once per machine: the disk prefix cache's key for the model's identity.

Remembered in this process and in the cache folder (``file-digests.json``) by the file's device, inode, size and
times, so a file written again gets a new entry. Half a second for a 0.5 GB model, once per machine.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> from hammer_plugins.support.private_folder import PrivateFolder
    >>> folder = Path(tempfile.mkdtemp())
    >>> model = folder / "m.gguf"; _ = model.write_bytes(b"weights")
    >>> file_digest(PrivateFolder(folder), folder, True, model)[:12]
    '9a129038d9a0'
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from hammer_plugins.support.private_folder import PrivateFolder

_DIGEST_INDEX = "file-digests.json"
_DIGEST_ENTRIES = 256
_DIGESTS: dict[str, str] = {}  # this process's memo


def file_digest(folder: PrivateFolder, directory: Path, usable: bool, path: str | Path) -> str:
    """The SHA-256 of the file at ``path`` (see the module); the index is kept in ``directory`` when ``usable``.
    Never raises for a full or read-only disk."""
    stat = Path(path).stat()
    # ctime too: setting a file's time back (utime) changes it, so rewriting a model in place and restoring
    # its modification time is still a new entry.
    where = f"{stat.st_dev}:{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}:{stat.st_ctime_ns}"
    if (known := _DIGESTS.get(where)) is not None:
        return known
    index_path = directory / _DIGEST_INDEX
    raw = folder.read(index_path)  # a FIFO planted here would block read_text() for ever
    try:
        index = json.loads(raw.decode("utf-8")) if raw is not None else {}
    except ValueError:
        index = {}
    index = index if isinstance(index, dict) else {}  # a damaged index is rebuilt
    digest = index.get(where)
    if not (isinstance(digest, str) and len(digest) == 64):
        sha = hashlib.sha256()
        with open(path, "rb") as stream:
            while chunk := stream.read(1 << 20):
                sha.update(chunk)
        digest = sha.hexdigest()
        index = {**{k: v for k, v in list(index.items())[-(_DIGEST_ENTRIES - 1):]}, where: digest}
        try:
            if not usable:
                raise OSError("the cache folder is refused")
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".partial-", suffix=".json")  # created 0600
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(index, out)
            os.replace(tmp, index_path)
        except OSError:
            pass
    _DIGESTS[where] = digest
    return digest
