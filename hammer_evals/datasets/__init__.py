"""Evaluation data shipped inside the package, and the full upstream files on request.

Shipped as package data (gzip-compressed JSON, Apache-2.0; sources, commits and authors in
``NOTICE`` beside this file), so ``hammer eval hammerbench`` and ``hammer eval academic`` run on a
fresh install with no ``--data``:

* ``hammerbench/en/``: the first 100 records of every English HammerBench file (single-turn,
  multi-turn, and the snapshot-id lists), from MadeAgents/HammerBench;
* ``academic/``: the Hammer paper's test sets API-Bank L-1 and L-2, Tool-Alpaca and Seal-Tools,
  whole, from MadeAgents/Hammer.

Every evaluator reads a data file in either spelling, ``name.json`` or ``name.json.gz``
(:func:`find_json`, :func:`read_json`), so ``--data`` takes the shipped folder, a user's own full
copy, or a folder :func:`download` filled: the full upstream files at a pinned commit, each checked
against its sha256, kept in the cache (``~/.cache/hammer-plugins/data``).

Example:
    >>> sorted(p.name for p in academic_dir().iterdir())
    ['apibank_l1.json.gz', 'apibank_l2.json.gz', 'sealtool.json.gz', 'toolalpaca.json.gz']
    >>> len(read_json(hammerbench_dir() / "multi-turn" / "HammerBench_IS.json"))
    100
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SHIPPED_DIR = Path(__file__).resolve().parent
"""The folder of the shipped data (inside the installed package)."""


def hammerbench_dir() -> Path:
    """The shipped HammerBench folder (``single-turn/``, ``multi-turn/``; 100 records a file)."""
    return SHIPPED_DIR / "hammerbench" / "en"


def academic_dir() -> Path:
    """The shipped academic test sets (``apibank_l1``, ``apibank_l2``, ``toolalpaca``, ``sealtool``)."""
    return SHIPPED_DIR / "academic"


def find_json(path: str | Path) -> Path | None:
    """``path`` if it is a file, else ``path`` + ``.gz`` if that is one, else None."""
    path = Path(path)
    if path.is_file():
        return path
    packed = path.with_name(path.name + ".gz")
    return packed if packed.is_file() else None


def read_json(path: str | Path) -> Any:
    """The JSON value in ``path`` or ``path.gz`` (see :func:`find_json`); FileNotFoundError names both."""
    found = find_json(path)
    if found is None:
        raise FileNotFoundError(f"neither {path} nor {path}.gz exists")
    data = found.read_bytes()
    return json.loads(gzip.decompress(data) if found.suffix == ".gz" else data)


@dataclass(frozen=True)
class UpstreamFile:
    """One file of an upstream repository: where it is there, where it goes here, and its checksum."""

    upstream: str
    local: str
    sha256: str
    size: int


@dataclass(frozen=True)
class Upstream:
    """A data set's upstream repository at a pinned commit, and the files :func:`download` fetches."""

    repo: str
    commit: str
    folder: str
    files: tuple[UpstreamFile, ...]


DOWNLOAD_URL = "https://raw.githubusercontent.com"
"""Where :func:`download` fetches from (``$HAMMER_DATA_URL`` overrides it): ``<url>/<repo>/<commit>/<path>``."""

UPSTREAM: dict[str, Upstream] = {}
"""The data sets :func:`download` knows, by evaluator name (filled below)."""


class DataDownloadError(RuntimeError):
    """A download failed or a file does not match its pinned sha256 (the message says which and the fix)."""


def downloaded_dir(name: str) -> Path:
    """Where :func:`download` keeps data set ``name`` (per pinned commit, under the cache)."""
    from hammer_plugins.model_source import cache_dir

    upstream = _upstream(name)
    return cache_dir() / "data" / name / upstream.commit[:12] / upstream.folder


def _upstream(name: str) -> Upstream:
    if name not in UPSTREAM:
        raise ValueError(f"unknown data set {name!r}; use one of {sorted(UPSTREAM)}")
    return UPSTREAM[name]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def download(name: str, *, url: str | None = None, force: bool = False, progress: bool = True) -> Path:
    """Fetch the full upstream files of ``name`` (``"hammerbench"`` or ``"academic"``); return their folder.

    Files already there with the right sha256 are kept (unless ``force``); each new file is written
    beside its place and moved in only after its checksum matched, so an interrupted download
    leaves nothing half-written. The folder is what ``--data`` takes.
    """
    upstream = _upstream(name)
    base = (url or os.environ.get("HAMMER_DATA_URL") or DOWNLOAD_URL).rstrip("/")
    target = downloaded_dir(name)
    for item in upstream.files:
        path = target / item.local
        if not force and path.is_file() and path.stat().st_size == item.size and _sha256(path) == item.sha256:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        source = f"{base}/{upstream.repo}/{upstream.commit}/{item.upstream}"
        if progress:
            print(f"data: {source} ({item.size / 1e6:.1f} MB)", file=sys.stderr, flush=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.part")
        digest = hashlib.sha256()
        try:
            with urllib.request.urlopen(source, timeout=120) as response, partial.open("wb") as out:  # noqa: S310
                while chunk := response.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise DataDownloadError(f"could not download {source}: {exc}. Fix: check the network (or "
                                    f"$HAMMER_DATA_URL), or run without --download to use the shipped subset.") from exc
        if digest.hexdigest() != item.sha256:
            partial.unlink(missing_ok=True)
            raise DataDownloadError(f"{source} does not match its pinned sha256 ({digest.hexdigest()} != "
                                    f"{item.sha256}): the download was corrupted or the server sent another file. "
                                    "Fix: run it again; if it persists, pass --data a copy of your own.")
        os.replace(partial, path)
    return target


_SHIPPED = {"hammerbench": hammerbench_dir, "academic": academic_dir}
_SHIPPED_WHAT = {"hammerbench": "the first 100 records of every English file",
                 "academic": "the four sets whole"}


def add_data_arguments(parser: Any, name: str) -> None:
    """``--data DIR`` and ``--download`` for evaluator ``name`` (an argparse parser)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--data", metavar="DIR",
                       help=f"a folder of your own copy of the data (.json or .json.gz files); default: the copy "
                            f"shipped in the package ({_SHIPPED_WHAT[name]})")
    group.add_argument("--download", action="store_true",
                       help="fetch the full upstream files at the pinned commit (sha256-checked, kept in the cache) "
                            "and evaluate on them")


def data_dir_from_args(args: Any, name: str) -> Path:
    """The folder the parsed ``--data`` / ``--download`` options name: the shipped copy when neither is given."""
    if getattr(args, "data", None):
        return Path(args.data)
    if getattr(args, "download", False):
        return download(name)
    return _SHIPPED[name]()
