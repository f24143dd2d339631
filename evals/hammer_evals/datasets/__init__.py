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
against its git blob id, kept in the cache (``~/.cache/hammer-plugins/data``).

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

from hammer_plugins.values.errors import HammerError

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
    """One file of an upstream repository: where it is there, where it goes here, and its checksum.

    The checksum is the file's git blob id at the pinned commit (SHA-1 of ``blob <size>\\0`` and the
    bytes: what git itself checks), known from the repository's tree for every file.
    """

    upstream: str
    local: str
    git_blob: str


@dataclass(frozen=True)
class Upstream:
    """A data set's upstream repository at a pinned commit, and the files :func:`download` fetches."""

    repo: str
    commit: str
    folder: str
    files: tuple[UpstreamFile, ...]


DOWNLOAD_URL = "https://raw.githubusercontent.com"
"""Where :func:`download` fetches from (``$HAMMER_DATA_URL`` overrides it): ``<url>/<repo>/<commit>/<path>``."""


def _files(folder: str, blobs: dict[str, str]) -> tuple[UpstreamFile, ...]:
    return tuple(UpstreamFile(upstream=f"{folder}/{path}", local=path, git_blob=blob) for path, blob in blobs.items())


UPSTREAM: dict[str, Upstream] = {
    # The full English files, at the commit before upstream cut them to the 100-record subsets
    # shipped here (cdbe885bb6a1318cb97a791bfcb89c982c432410 holds the subsets, byte for byte).
    "hammerbench": Upstream(repo="MadeAgents/HammerBench", commit="ef868598f24cec5a589cc88a64a0c27962661f7f",
                            folder="data/en", files=_files("data/en", {
                                "multi-turn/HammerBench_Based.json": "e7ddffb097ccc22bd012bfb2899caf172efac270",
                                "multi-turn/HammerBench_External.json": "5527fd5e11ee2c13b1e0420bb6321370d1900516",
                                "multi-turn/HammerBench_IS.json": "81aa88d4ba3ee3f73e5bb236be5d3ecb6886f27d",
                                "multi-turn/HammerBench_SO_case1.json": "50626f063d4685fad80ffb955d988a549710b6bb",
                                "multi-turn/HammerBench_SO_case2.json": "47f7a1a426bb9cfce5975bf93de90b4944ac9ba5",
                                "multi-turn/HammerBench_mQmA.json": "f5ff0497235d6d2bd20e6c202eefaf986dba2b02",
                                "multi-turn/HammerBench_mQsA.json": "bc75ca3751f693b56bdbfe26e1f73e747925d26d",
                                "multi-turn/HammerBench_mSv.json": "0c1b94ae1661438043f5d5f5f4e2ab9eb23b01dc",
                                "multi-turn/HammerBench_sQmA.json": "3941f33c800ddd210ccec1931fcea10c072036e0",
                                "multi-turn/snapshot_id/snap_shot_id_External.json": "713f193fe2d7b9ef2d916344487a9adeba120e66",
                                "multi-turn/snapshot_id/snap_shot_id_SO_case1.json": "e5cd2824501486df82bd84fc06fe36b0e19c2852",
                                "multi-turn/snapshot_id/snap_shot_id_SO_case2.json": "0b137a17b143a0c6930301599f23388073cffe18",
                                "single-turn/ST_External.json": "c34309a1772dca4fc6481024bc52d1f64bef0cab",
                                "single-turn/ST_Imperfect.json": "5e6e53ce6b567a86452166aafe5e6d53a37bdd7d",
                                "single-turn/ST_Perfect.json": "14e2db391c27fa44a1f0a2c08605153d2ee0bb0e",
                                "single-turn/ir_ST_External.json": "9bad1f3032f2a819e0300582cbb50a862403f2ec",
                                "single-turn/ir_ST_Imperfect.json": "076116a05bbbd0aa66bc156b489736538e6c5004",
                                "single-turn/ir_ST_Perfect.json": "976e2dd08b91af8548cff08c260a2078ec2db27f",
                            })),
    # The paper's test sets, whole: the shipped files are these, byte for byte.
    "academic": Upstream(repo="MadeAgents/Hammer", commit="ff415d9998180b5a68bbfdda3309ec04b472fb49",
                         folder="data/test/original", files=_files("data/test/original", {
                             "apibank_l1.json": "5649186a0045f2cdbe2b2990f950b297c20ab957",
                             "apibank_l2.json": "64aa399489486558fea40ac23dfe955175473559",
                             "toolalpaca.json": "17a6c5e0b5714d53155576a9a3ef11a25bd96a18",
                             "sealtool.json": "888e58f7525c3c8e9b81eca62218735fc5f15099",
                         })),
}
"""The data sets :func:`download` knows, by evaluator name, each pinned to a commit."""


class DataDownloadError(HammerError):
    """A download failed or a file does not match its pinned checksum (the message says which and the fix)."""


def downloaded_dir(name: str) -> Path:
    """Where :func:`download` keeps data set ``name`` (per pinned commit, under the cache)."""
    from hammer_plugins.support.cache_location import cache_dir

    upstream = _upstream(name)
    return cache_dir() / "data" / name / upstream.commit[:12] / upstream.folder


def _upstream(name: str) -> Upstream:
    if name not in UPSTREAM:
        raise ValueError(f"unknown data set {name!r}; use one of {sorted(UPSTREAM)}")
    return UPSTREAM[name]


def git_blob_id(path: str | Path) -> str:
    """The git blob id of a file's bytes (what ``git hash-object`` prints).

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile(delete=False) as f:
        ...     _ = f.write(b"hello\\n")
        >>> git_blob_id(f.name)
        'ce013625030ba8dba906f756967f9e9ca394464a'
    """
    path = Path(path)
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())  # noqa: S324 - git's own id, not security
    with path.open("rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def download(name: str, *, url: str | None = None, force: bool = False, progress: bool = True) -> Path:
    """Fetch the full upstream files of ``name`` (``"hammerbench"`` or ``"academic"``); return their folder.

    Files already there with the right checksum are kept (unless ``force``); each new file is written
    beside its place and moved in only after its checksum matched, so an interrupted download
    leaves nothing half-written. The folder is what ``--data`` takes.
    """
    upstream = _upstream(name)
    base = (url or os.environ.get("HAMMER_DATA_URL") or DOWNLOAD_URL).rstrip("/")
    target = downloaded_dir(name)
    for item in upstream.files:
        path = target / item.local
        if not force and path.is_file() and git_blob_id(path) == item.git_blob:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        source = f"{base}/{upstream.repo}/{upstream.commit}/{item.upstream}"
        if progress:
            print(f"data: {source}", file=sys.stderr, flush=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.part")
        try:
            with urllib.request.urlopen(source, timeout=120) as response, partial.open("wb") as out:  # noqa: S310
                while chunk := response.read(1 << 20):
                    out.write(chunk)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise DataDownloadError(f"could not download {source}: {exc}. Fix: check the network (or "
                                    f"$HAMMER_DATA_URL), or run without --download to use the shipped subset.") from exc
        got = git_blob_id(partial)
        if got != item.git_blob:
            partial.unlink(missing_ok=True)
            raise DataDownloadError(f"{source} does not match its pinned git blob id ({got} != {item.git_blob}): "
                                    "the download was corrupted or the server sent another file. Fix: run it again; "
                                    "if it persists, pass --data a copy of your own.")
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
                       help="fetch the full upstream files at the pinned commit (each checked against its git blob id, kept in "
                            "the cache) "
                            "and evaluate on them")


def data_dir_from_args(args: Any, name: str) -> Path:
    """The folder the parsed ``--data`` / ``--download`` options name: the shipped copy when neither is given."""
    if getattr(args, "data", None):
        return Path(args.data)
    if getattr(args, "download", False):
        return download(name)
    return _SHIPPED[name]()
