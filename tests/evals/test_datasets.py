"""The evaluation data shipped in the package, and ``--download`` against a loopback server.

No test reaches outside this machine: the "upstream" is an HTTP server on 127.0.0.1 laid out like
``<url>/<owner>/<repo>/<commit>/<path>``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from hub_fixtures import serve_on_loopback

from hammer_evals import datasets
from hammer_evals.academic.data import SETS, load_set
from hammer_evals.hammerbench.data import FILE_SPECS, load_file

ROOT = Path(__file__).resolve().parents[2]


def test_every_hammerbench_file_and_academic_set_ships_inside_the_package() -> None:
    for stem in FILE_SPECS:
        records = load_file(datasets.hammerbench_dir(), stem)
        assert len(records) == 100, stem
    assert {name: len(load_set(datasets.academic_dir(), name)) for name in SETS} == {
        "apibank_l1": 399, "apibank_l2": 127, "toolalpaca": 114, "sealtool": 294}


def test_the_shipped_files_are_gzip_with_a_notice_naming_source_commit_license_and_authors() -> None:
    packed = sorted(datasets.SHIPPED_DIR.rglob("*.json.gz"))
    assert len(packed) == 22
    assert not list(datasets.SHIPPED_DIR.rglob("*.json"))  # compressed only
    notice = (datasets.SHIPPED_DIR / "NOTICE").read_text()
    for upstream in datasets.UPSTREAM.values():
        assert upstream.repo in notice and upstream.commit in notice
    assert notice.count("Apache License, Version 2.0") >= 2 and "authors" in notice.lower()
    # The hammer-evals wheel carries them with this NOTICE beside them (hatch packages every file under
    # hammer_evals/; tests/packaging builds the wheel and finds it there once, and evals/NOTICE in its dist-info).
    assert 'packages = ["hammer_evals"]' in (ROOT / "evals" / "pyproject.toml").read_text()
    assert "Evaluation data shipped with hammer-evals\n" in notice and "hammer-plugins" not in notice


def test_either_spelling_of_a_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "plain.json").write_text('[1, 2]')
    (tmp_path / "packed.json.gz").write_bytes(gzip.compress(b'{"a": "\\u00e9"}'))
    assert datasets.read_json(tmp_path / "plain.json") == [1, 2]
    assert datasets.read_json(tmp_path / "packed.json") == {"a": "é"}
    assert datasets.find_json(tmp_path / "packed.json") == tmp_path / "packed.json.gz"
    with pytest.raises(FileNotFoundError, match="missing.json.gz"):
        datasets.read_json(tmp_path / "missing.json")


def test_a_users_own_uncompressed_copy_still_works(tmp_path: Path) -> None:
    (tmp_path / "toolalpaca.json").write_text(json.dumps(datasets.read_json(datasets.academic_dir() / "toolalpaca.json")))
    assert len(load_set(tmp_path, "toolalpaca", limit=3)) == 3


def _blob(body: bytes) -> str:
    """git's blob id, computed here independently of the package (the oracle of its checksum)."""
    return hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest()  # noqa: S324


def test_the_pinned_academic_checksums_are_those_of_the_shipped_sets() -> None:
    """The shipped sets are the upstream files byte for byte: their blob ids must be the pinned ones."""
    for item in datasets.UPSTREAM["academic"].files:
        body = gzip.decompress((datasets.academic_dir() / f"{item.local}.gz").read_bytes())
        assert _blob(body) == item.git_blob, item.local
    assert len(datasets.UPSTREAM["hammerbench"].files) == 18


class _Upstream:
    """A loopback server for ``<owner>/<repo>/<commit>/<path>``; counts requests; can lie about one file."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files
        self.requests: list[str] = []


@contextmanager
def _serve(state: _Upstream) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            state.requests.append(self.path)
            body = state.files.get(self.path.lstrip("/"))
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serve_on_loopback(Handler) as url:
        yield url


@pytest.fixture
def fake_upstream(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> _Upstream:
    """A two-file data set pinned like the real ones, with the cache in ``tmp_path``."""
    contents = {"data/test/toolalpaca.json": b'[{"query": "q"}]', "data/test/sealtool.json": b'[{"query": "s"}]'}
    files = tuple(datasets.UpstreamFile(upstream=path, local=Path(path).name, git_blob=_blob(body))
                  for path, body in contents.items())
    commit = "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.setitem(datasets.UPSTREAM, "academic",
                        datasets.Upstream(repo="Owner/Repo", commit=commit, folder="data/test", files=files))
    monkeypatch.setenv("HAMMER_CACHE_DIR", str(tmp_path / "cache"))
    return _Upstream({f"Owner/Repo/{commit}/{path}": body for path, body in contents.items()})


def test_download_fetches_the_pinned_files_checks_them_and_keeps_them(fake_upstream: _Upstream) -> None:
    with _serve(fake_upstream) as url:
        folder = datasets.download("academic", url=url, progress=False)
        assert sorted(p.name for p in folder.iterdir()) == ["sealtool.json", "toolalpaca.json"]
        assert datasets.read_json(folder / "toolalpaca.json") == [{"query": "q"}]
        asked = len(fake_upstream.requests)
        assert datasets.download("academic", url=url, progress=False) == folder  # kept: nothing asked again
        assert len(fake_upstream.requests) == asked == 2


def test_a_file_that_does_not_match_its_checksum_is_refused_and_nothing_half_written_stays(
        fake_upstream: _Upstream) -> None:
    key = next(k for k in fake_upstream.files if k.endswith("sealtool.json"))
    fake_upstream.files[key] = b'[{"query": "tampered"}]'
    with _serve(fake_upstream) as url, pytest.raises(datasets.DataDownloadError, match="git blob id"):
        datasets.download("academic", url=url, progress=False)
    folder = datasets.downloaded_dir("academic")
    assert not (folder / "sealtool.json").exists()
    assert not [p for p in folder.iterdir() if p.name.endswith(".part")]


def test_an_unreachable_server_is_an_error_that_names_the_url_and_the_fix(fake_upstream: _Upstream) -> None:
    with _serve(fake_upstream) as url:
        pass  # closed: nothing listens there any more
    with pytest.raises(datasets.DataDownloadError, match="could not download http://127.0.0.1.*without --download"):
        datasets.download("academic", url=url, progress=False)


def test_the_cli_reads_the_download_option(fake_upstream: _Upstream, monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from hammer_evals.cli import add_eval_parser

    parser = argparse.ArgumentParser(prog="hammer")
    add_eval_parser(parser.add_subparsers(dest="command"))
    with _serve(fake_upstream) as url:
        monkeypatch.setenv("HAMMER_DATA_URL", url)
        args = parser.parse_args(["eval", "academic", "--download"])
        assert datasets.data_dir_from_args(args, "academic") == datasets.downloaded_dir("academic")
    assert datasets.data_dir_from_args(parser.parse_args(["eval", "academic"]), "academic") == datasets.academic_dir()
