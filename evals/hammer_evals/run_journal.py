"""What a resumable evaluation keeps between runs: its settings, and answer files a kill may have cut.

Both evaluators (``hammer eval hammerbench``, ``hammer eval academic``) append each answer to a JSON
Lines file as it comes, so a killed run loses at most the line it was writing; ``--resume`` drops
that line and asks only what is missing, after checking that the stored answers were made with the
same settings.

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "answers.jsonl").write_text('{"a": 1}\\n{"a": 2')
    >>> drop_partial_line(folder / "answers.jsonl")
    >>> (folder / "answers.jsonl").read_text()
    '{"a": 1}\\n'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RUN_SETTINGS = "run_settings.json"


def write_json(path: str | Path, payload: Any) -> Path:
    """``payload`` as indented JSON (folders made as needed)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    return target


def check_resumable(out: Path, settings: dict[str, Any]) -> None:
    """A resumed run reuses stored answers, so they must come from the same settings (``run_settings.json``)."""
    stored_path = out / RUN_SETTINGS
    if not stored_path.is_file():
        return
    stored = json.loads(stored_path.read_text(encoding="utf-8"))
    if stored != settings:
        changed = sorted(k for k in set(stored) | set(settings) if stored.get(k) != settings.get(k))
        raise ValueError(
            f"{out} holds answers made with other settings ({', '.join(changed)}: stored {[stored.get(k) for k in changed]}, "
            f"now {[settings.get(k) for k in changed]}); resuming would mix them. Fix: use another --output, "
            "or run without --resume to start that folder afresh.")


def drop_partial_line(path: Path) -> None:
    """Cut a last line the killed run did not finish, so the lines appended on resume start clean.

    A last line that is whole JSON without its newline (a hand-edited file) only gets the newline.
    """
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return
    start = data.rfind(b"\n") + 1
    try:
        json.loads(data[start:])
    except ValueError:
        with path.open("r+b") as stream:
            stream.truncate(start)
        return
    with path.open("ab") as stream:
        stream.write(b"\n")
