"""Text from outside as a person sees it: printable on a terminal, and names told apart.

A tool's name, its arguments and its result come from whoever wrote the tool (an MCP server, an OpenAI
request) or from the model. Printed raw, an escape sequence in a name retitles the terminal or moves its
cursor, and ``get_current_time\\u200b`` (a zero-width space at the end) looks exactly like
``get_current_time``. :func:`printable` escapes what a terminal would act on or not show;
:func:`name_key` is what a person can see of a name, and :func:`look_alike_key` maps it further onto the
ASCII letters and digits that letters of other scripts imitate (Cyrillic ``сору`` is ``copy``), so
:func:`hammer_plugins.tools.definition.to_tools` refuses two tools whose keys are equal (every way tools are bound goes
through it). :func:`mixed_script_look_alike` finds the letter that makes one name an imitation: a name with
ASCII letters and a letter of another script that looks like one (``gеt_current_time`` with a Cyrillic
``е``), the mixes that browsers refuse in domain names.

Example:
    >>> printable("get_time\\x1b]0;pwned\\x07"), printable("a\\u200bb")
    ('get_time\\\\x1b]0;pwned\\\\x07', 'a\\\\u200bb')
    >>> name_key("get_current_time\\u200b") == name_key("get_current_time"), name_key("ｇｅｔ") == "get"
    (True, True)
    >>> look_alike_key("\\u0441\\u043e\\u0440\\u0443"), mixed_script_look_alike("g\\u0435t_time")
    ('copy', ('\\u0435', 'e'))
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable
from typing import Any

from hammer_plugins.values.errors import SchemaConversionError

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


@functools.lru_cache(maxsize=1)
def _confusables() -> tuple[dict[str, Any], Any]:
    # Unicode's confusables data (UTS #39) and script table, as the confusable-homoglyphs package ships them.
    # Imported here, not at the top: only a name with a character outside ASCII needs it (1 MB of JSON,
    # about 30 ms), and vLLM's plugin, which loads this package without its requirements, never binds names.
    from confusable_homoglyphs import categories, confusables

    return confusables.confusables_data, categories.alias


_NO_SCRIPT = frozenset({"COMMON", "INHERITED"})  # digits, punctuation, combining marks: shared by every script


def _ascii_twin(char: str) -> str | None:
    """The ASCII letter or digit that ``char``, a letter of another script, is listed as looking like."""
    data, alias = _confusables()
    if char.isascii() or alias(char) in _NO_SCRIPT:
        return None
    for glyph in data.get(char, ()):
        twin = glyph["c"]
        if len(twin) == 1 and twin.isascii() and twin.isalnum():
            # Unicode lists capital I, digit 1 and small l as one shape, and writes it l; a capital letter
            # of that shape (Greek Ι, Cyrillic І) imitates the capital I of an ASCII name.
            return "I" if twin == "l" and char.isupper() else twin
    return None


def look_alike_key(name: str) -> str:
    """``name`` (a :func:`name_key`) with each letter of another script that Unicode lists as confusable
    with an ASCII letter or digit written as that ASCII character: Cyrillic ``сору`` and Greek ``ΑΒ`` read
    ``copy`` and ``AB``. Two tools with one key look alike to a person."""
    if name.isascii():
        return name
    return "".join(_ascii_twin(c) or c for c in name)


def mixed_script_look_alike(name: str) -> tuple[str, str] | None:
    """``(letter, ascii)`` where ``name`` (a :func:`name_key`) has ASCII letters and a letter of another
    script that looks like the ASCII ``ascii`` (``gеt_time``'s Cyrillic ``е``); ``None`` otherwise. A name in
    one script (``получить_погоду``), or mixing scripts without such a letter (``calc_π``, ``get_天気``), is
    not an imitation."""
    if name.isascii() or not any(c.isascii() and c.isalpha() for c in name):
        return None
    for char in name:
        twin = _ascii_twin(char)
        if twin is not None:
            return char, twin
    return None


def check_names_apart(names: Iterable[str]) -> None:
    """Raise :class:`SchemaConversionError` naming the tool unless every name is unique, visible, written in
    one script where it imitates ASCII (:func:`mixed_script_look_alike`), and looks different from every
    other (:func:`name_key`, :func:`look_alike_key`). The errors show names with ``repr``: invisible
    characters as escapes."""
    names_seen: set[str] = set()
    keys: dict[str, str] = {}  # what a person sees of each name -> the name
    for name in names:
        if name in names_seen:
            raise SchemaConversionError(name, "name", "two tools share this name", "give every tool a unique name")
        key = name_key(name)
        if not key:
            raise SchemaConversionError(name, "name", "the name has no visible character",
                                        "name the tool with letters, digits or _")
        imitation = mixed_script_look_alike(key)
        if imitation is not None:
            letter, twin = imitation
            raise SchemaConversionError(
                name, "name", f"the name mixes scripts: U+{ord(letter):04X} {unicodedata.name(letter, '?')} looks like "
                f"the ASCII {twin!r}, so the name imitates another one",
                "write the name in one script (ASCII letters, digits and _ are what every client expects)")
        key = look_alike_key(key)
        if key in keys:
            raise SchemaConversionError(name, "name", f"the names {keys[key]!r} and {name!r} differ only by "
                                        "invisible or look-alike characters, so a person cannot tell the tools apart",
                                        "rename one of them (or remove the invisible characters)")
        keys[key] = name
        names_seen.add(name)
