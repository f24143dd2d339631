"""Text from outside as a person sees it: printable on a terminal, and names told apart (issue 37, class 7).

A tool's name, its arguments and its result come from whoever wrote the tool (an MCP server, an OpenAI
request) or from the model. Printed raw, an escape sequence in a name retitles the terminal or moves its
cursor, and ``get_current_time\\u200b`` (a zero-width space at the end) looks exactly like
``get_current_time``. :func:`printable` escapes what a terminal would act on or not show;
:func:`name_key` is what a person can see of a name, so :func:`hammer_plugins.tools.to_tools` refuses
two tools whose keys are equal (every way tools are bound goes through it).

Example:
    >>> printable("get_time\\x1b]0;pwned\\x07"), printable("a\\u200bb")
    ('get_time\\\\x1b]0;pwned\\\\x07', 'a\\\\u200bb')
    >>> name_key("get_current_time\\u200b") == name_key("get_current_time"), name_key("ｇｅｔ") == "get"
    (True, True)
"""

from __future__ import annotations

import unicodedata

# Default-ignorable code points outside category Cf (Unicode's DerivedCoreProperties): fillers and
# selectors that show nothing.
_IGNORABLE = frozenset(
    [0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, *range(0x180B, 0x1810), *range(0xFE00, 0xFE10),
     *range(0xE0100, 0xE01F0)])
# Not shown as themselves: controls, format characters (zero-width, bidi overrides), separators of
# lines and paragraphs, surrogates, private use, unassigned.
_INVISIBLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every character a terminal would act on or not show written as an escape (``\\x1b``,
    ``\\u200b``): controls, format characters, line separators, other spaces than ``" "``, ... (what
    :meth:`str.isprintable` refuses). ``keep_newlines`` keeps ``\\n`` and ``\\t`` (a model's answer)."""
    if text.isprintable():
        return text
    kept = "\n\t" if keep_newlines else ""
    return "".join(c if c.isprintable() or c in kept else _escape(c) for c in text)


def printable_json(text: str) -> str:
    """JSON text (``json.dumps(..., ensure_ascii=False)``) with what :func:`printable` escapes written as
    JSON's ``\\uXXXX`` escapes: the same JSON value, safe on a terminal, non-ASCII letters kept readable."""
    if text.isprintable():
        return text
    out = []
    for c in text:
        if c.isprintable():
            out.append(c)
        else:
            units = c.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{int.from_bytes(units[i:i + 2], 'big'):04x}" for i in range(0, len(units), 2))
    return "".join(out)


def name_key(name: str) -> str:
    """What a person can see of ``name``: its NFKC form (``ｇｅｔ`` is ``get``, ``ﬁ`` is ``fi``) without the
    characters that show nothing (format, control and default-ignorable characters), its whitespace
    trimmed and each run of it one space."""
    normal = unicodedata.normalize("NFKC", name)
    seen = "".join(c for c in normal if c.isspace() or not (ord(c) in _IGNORABLE or unicodedata.category(c) in _INVISIBLE))
    return " ".join(seen.split())
