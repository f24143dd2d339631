"""A function's docstring read for a tool: its summary and each argument's description (Google, NumPy
or reST style).

Example:
    >>> parse_docstring("Get the weather.\\n\\nArgs:\\n    city: City name.")
    ('Get the weather.', {'city': 'City name.'})
"""

from __future__ import annotations

import re

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Notes?)\s*:?\s*$")
_GOOGLE_ARG = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_REST_ARG = re.compile(r"^:param\s+(?:[\w\[\], ]+\s+)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-, NumPy- or reST-style docstring into (summary, {param: description})."""
    lines = doc.splitlines()
    summary_lines: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    i = 0
    while i < len(lines):
        raw = lines[i]
        line = raw.strip()
        i += 1
        rest = _REST_ARG.match(line)
        if rest:
            current, section = rest.group(1), "args"
            args[current] = rest.group(2).strip()
            continue
        if line.startswith(":"):
            current, section = None, "other"
            continue
        header = _SECTION.match(line)
        if header:
            section = "args" if header.group(1).lower().startswith(("arg", "param")) else "other"
            current = None
            if i < len(lines) and set(lines[i].strip()) == {"-"}:  # NumPy underline
                i += 1
            continue
        if section is None:
            summary_lines.append(line)
        elif section == "args" and line:
            indent = len(raw) - len(raw.lstrip())
            match = _GOOGLE_ARG.match(line)
            if match and (current is None or indent <= _arg_indent(lines, current)):
                current = match.group(1).lstrip("*")
                args[current] = match.group(3).strip()
            elif current is not None:
                args[current] = f"{args[current]} {line}".strip()
            elif ":" not in line:
                current = line.split()[0]
                args[current] = ""
    summary = " ".join(part for part in "\n".join(summary_lines).strip().split("\n\n")[0].split())
    if not summary:
        summary = " ".join("\n".join(summary_lines).split())
    return summary, args


def _arg_indent(lines: list[str], name: str) -> int:
    for raw in lines:
        if raw.strip().startswith(name):
            return len(raw) - len(raw.lstrip())
    return 0


# ---------------------------------------------------------------- dispatch
