"""The prefix cache's folder is the user's own (issue 60, item 4): what another local user can plant in it,
or make of it, is a miss, never a hang, a wrong state or a read of another file.

Each test reproduces a step of the red team's attack: a FIFO where an entry goes (it blocked the loader
in ``open()`` for good), a symlink, a device, a folder another user owns or others can write, and an entry
forged from public inputs (the check was an unkeyed SHA-256).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hammer_plugins.backends.prefix_cache import _MAGIC, PrefixCache, _token_bytes
from hammer_plugins.support import private_folder
from hammer_plugins.support.private_folder import KEY_FILE, PrivateFolder

RUNTIME = "model.gguf|llama.cpp 0.3"
TOKENS = [11, 12, 13]
OTHER_USER = 65534  # nobody


def _within(seconds: float, work: Callable[[], Any], fifo: Path | None = None) -> Any:
    """``work()``'s result, failing (not hanging) when it takes longer: a reader blocked on ``fifo`` is let go by
    opening its write end, so the red run ends too."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # the blocked open() returns; it reads EOF
        thread.join(5)
        pytest.fail(f"blocked for over {seconds} s")
    return result[0]


def test_the_folder_is_created_0700_and_its_key_0600(tmp_path: Path) -> None:
    cache = PrefixCache(tmp_path / "kv")
    cache.store(RUNTIME, TOKENS, b"state")
    assert stat.S_IMODE(os.stat(tmp_path / "kv").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "kv" / KEY_FILE).st_mode) == 0o600
    assert cache.load(RUNTIME, TOKENS) == b"state"


def test_an_own_folder_others_can_read_is_tightened(tmp_path: Path) -> None:
    """The old default was 0755: every local user could read the KV states (what the system prompts said)."""
    (tmp_path / "kv").mkdir(mode=0o755)
    os.chmod(tmp_path / "kv", 0o755)
    PrefixCache(tmp_path / "kv").store(RUNTIME, TOKENS, b"state")
    assert stat.S_IMODE(os.stat(tmp_path / "kv").st_mode) == 0o700


def test_a_fifo_where_an_entry_goes_is_a_miss_not_a_hang(tmp_path: Path) -> None:
    cache = PrefixCache(tmp_path / "kv")
    cache.store(RUNTIME, [1], b"x")  # the folder and its key exist, as on a machine that used it
    fifo = cache.path_for(RUNTIME, TOKENS)
    os.mkfifo(fifo)
    assert _within(5, lambda: cache.load(RUNTIME, TOKENS), fifo) is None
    cache.store(RUNTIME, TOKENS, b"state")  # the store replaces it with a real entry
    assert cache.load(RUNTIME, TOKENS) == b"state"


def test_a_fifo_as_the_digest_index_is_no_hang(tmp_path: Path) -> None:
    cache = PrefixCache(tmp_path / "kv")
    cache.store(RUNTIME, [1], b"x")
    fifo = tmp_path / "kv" / "file-digests.json"
    os.mkfifo(fifo)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"weights")
    digest = _within(5, lambda: cache.file_digest(model), fifo)
    assert digest == hashlib.sha256(b"weights").hexdigest()


def test_a_symlink_to_a_valid_entry_is_a_miss(tmp_path: Path) -> None:
    """The entry is whole and keyed, but it is a link: whoever can plant a link could point it anywhere (another
    user's file, a device), so only a regular file in the folder is read."""
    cache = PrefixCache(tmp_path / "kv")
    cache.store(RUNTIME, TOKENS, b"state")
    entry = cache.path_for(RUNTIME, TOKENS)
    elsewhere = tmp_path / "elsewhere.kv"
    os.replace(entry, elsewhere)
    entry.symlink_to(elsewhere)
    assert cache.load(RUNTIME, TOKENS) is None
    assert elsewhere.exists()  # the link went (a damaged entry), never what it pointed at


def test_a_device_where_an_entry_goes_is_a_miss(tmp_path: Path) -> None:
    cache = PrefixCache(tmp_path / "kv")
    cache.store(RUNTIME, [1], b"x")
    entry = cache.path_for(RUNTIME, TOKENS)
    try:
        os.mknod(entry, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero: a read never ends
    except (PermissionError, AttributeError):
        pytest.skip("making a device node needs root")
    assert _within(5, lambda: cache.load(RUNTIME, TOKENS)) is None


def _foreign(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``folder`` another user's: for real as root, else by telling the check this process is another user."""
    if os.geteuid() == 0:
        os.chown(folder, OTHER_USER, OTHER_USER)
    else:
        monkeypatch.setattr(private_folder, "_uid", lambda: os.geteuid() + 1)


@pytest.mark.parametrize("how", ["foreign owner", "mode 0777", "mode 0770", "mode 1777"])
def test_a_folder_someone_else_controls_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture, how: str) -> None:
    """The red team's set-up: another user made HAMMER_PREFIX_CACHE_DIR (0777, in a 1777 folder) and wrote a
    state under the victim's key. Refused with a warning; the backend runs without the disk cache."""
    shared = tmp_path / "kv"
    victim = PrefixCache(shared)
    victim.store(RUNTIME, TOKENS, b"what the victim's prompt evaluates to")  # a whole, keyed entry is there
    if how == "foreign owner":
        _foreign(shared, monkeypatch)
    else:
        os.chmod(shared, int(how.split()[1], 8))
    private_folder._WARNED.clear()
    with caplog.at_level(logging.WARNING, logger="hammer_plugins"):
        cache = PrefixCache(shared)
        assert cache.load(RUNTIME, TOKENS) is None
        cache.store(RUNTIME, [99], b"kept?")
    assert not cache.usable
    assert not cache.path_for(RUNTIME, [99]).exists()  # nothing written into someone else's folder
    assert cache.clear() == 0 and cache.path_for(RUNTIME, TOKENS).exists()  # nor deleted from it
    assert [r for r in caplog.records if "not using the cache folder" in r.getMessage()]


def test_an_entry_forged_without_the_key_is_a_miss(tmp_path: Path) -> None:
    """Everything in an entry but the key is public (runtime description, token ids, the KV state a public model
    gives): one written with the old unkeyed SHA-256, or under another folder's key, is refused and removed."""
    cache = PrefixCache(tmp_path / "kv")
    cache.store(RUNTIME, [1], b"x")
    entry = cache.path_for(RUNTIME, TOKENS)
    forged = b"the attacker's KV state"
    for check in ({"sha256": hashlib.sha256(forged).hexdigest()},
                  {"hmac": hashlib.sha256(forged).hexdigest()}):
        header = json.dumps({"runtime": RUNTIME, "n_tokens": len(TOKENS), **check}).encode() + b"\n"
        entry.write_bytes(_MAGIC + header + _token_bytes(TOKENS) + forged)
        assert cache.load(RUNTIME, TOKENS) is None and not entry.exists()
    attacker = PrefixCache(tmp_path / "attacker")  # the same code, the attacker's own key
    attacker.store(RUNTIME, TOKENS, forged)
    entry.write_bytes(attacker.path_for(RUNTIME, TOKENS).read_bytes())
    assert attacker.load(RUNTIME, TOKENS) == forged and cache.load(RUNTIME, TOKENS) is None


def test_a_key_file_that_is_not_a_private_key_is_replaced(tmp_path: Path) -> None:
    folder = PrivateFolder(tmp_path / "kv")
    assert folder.ensure()
    outside = tmp_path / "known-key"
    outside.write_bytes(b"k" * 32)
    (folder.path / KEY_FILE).symlink_to(outside)  # a key someone else knows, linked in
    key = folder.key()
    assert key is not None and key != b"k" * 32 and not (folder.path / KEY_FILE).is_symlink()
    assert PrivateFolder(folder.path).key() == key  # kept: the next process reads the same key
