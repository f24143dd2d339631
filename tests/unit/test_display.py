"""Names shown to a person are printable, and tools a person cannot tell apart are refused (issue 37, class 7).

:func:`printable` escapes whatever a terminal would act on or not show; :func:`to_tools` (every binding:
the engine, the server, the adapters, MCP) refuses two names that differ only by invisible or
compatibility characters, naming both with the invisible characters escaped, or by letters of another
script that look like ASCII ones; and one name that mixes ASCII letters with such a letter. The oracle for
the look-alikes is a hand-written table of the Cyrillic and Greek letters everyone knows to imitate ASCII,
independent of the Unicode data the code reads.
"""

from __future__ import annotations

import argparse
import json
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from hammer_plugins import HammerEngine, Message
from hammer_plugins.backends.scripted import ScriptedBackend
from hammer_plugins.cli.main import _may_run
from hammer_plugins.tools.definition import to_tools
from hammer_plugins.tools.names import name_key, printable, printable_json
from hammer_plugins.values.calls import ToolCall
from hammer_plugins.values.errors import SchemaConversionError

ESCAPE_NAME = "time\x1b]0;pwned\x07\x1b[2J\x1b[1;1Hnow"


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}


# ------------------------------------------------------------------ printable
@pytest.mark.parametrize(("text", "shown"), [
    (ESCAPE_NAME, "time\\x1b]0;pwned\\x07\\x1b[2J\\x1b[1;1Hnow"),
    ("a\u200bb", "a\\u200bb"), ("evil\u202etxt.exe", "evil\\u202etxt.exe"), ("csi\x9b31m", "csi\\x9b31m"),
    ("line\nbreak\ttab\rcr", "line\\x0abreak\\x09tab\\x0dcr"), ("nb\u00a0sp", "nb\\xa0sp"), ("sep\u2028", "sep\\u2028"),
    ("plane\U000f0000", "plane\\U000f0000"), ("caf\u00e9 \u5929\u6c14 get_time", "caf\u00e9 \u5929\u6c14 get_time"),
])
def test_printable_escapes_what_a_terminal_would_act_on_or_not_show(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_a_models_answer_keeps_its_lines() -> None:
    assert printable("one\n\ttwo\x1b[2J", keep_newlines=True) == "one\n\ttwo\\x1b[2J"


@settings(max_examples=examples(300), deadline=None)
@given(st.text())
def test_printable_output_is_printable(text: str) -> None:
    assert printable(text).isprintable()
    assert all(c.isprintable() or c in "\n\t" for c in printable(text, keep_newlines=True))


@settings(max_examples=examples(300), deadline=None)
@given(st.recursive(st.text() | st.integers(), lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8))
def test_printable_json_is_the_same_json_and_printable(value: Any) -> None:
    shown = printable_json(json.dumps(value, ensure_ascii=False))
    assert json.loads(shown) == value and shown.isprintable()


# ------------------------------------------------------------------ names a person cannot tell apart
@pytest.mark.parametrize("twin", [
    "get_current_time\u200b", "\u200dget_current_time", "get_current_\u00adtime", "get_\u2060current_time",
    "get_current_time\ufe0f", "\uff47et_current_time", "get_current_time ", "get_current\u3164_time",
])
def test_two_tools_a_person_cannot_tell_apart_are_refused_naming_both(twin: str) -> None:
    with pytest.raises(SchemaConversionError) as caught:
        to_tools([tool("get_current_time"), tool(twin)])
    message = str(caught.value)
    assert repr("get_current_time") in message and repr(twin) in message
    assert "differ only by invisible or look-alike characters" in message and message.isprintable()


def test_names_that_look_different_are_kept() -> None:
    names = ["get_time", "get_Time", "get_time2", "get time", "gettime", "get_t\u00efme", "\u83b7\u53d6\u65f6\u95f4"]
    assert [t.name for t in to_tools([tool(n) for n in names])] == names


# Cyrillic and Greek letters that imitate ASCII ones (written by hand: the oracle, not Unicode's data).
IMITATIONS = {"\u0430": "a", "\u0435": "e", "\u043e": "o", "\u0440": "p", "\u0441": "c", "\u0443": "y", "\u0445": "x",
              "\u0456": "i", "\u0458": "j", "\u0455": "s", "\u0410": "A", "\u0412": "B", "\u0415": "E", "\u041a": "K",
              "\u041c": "M", "\u041d": "H", "\u041e": "O", "\u0420": "P", "\u0421": "C", "\u0422": "T", "\u0425": "X",
              "\u0406": "I", "\u0391": "A", "\u0392": "B", "\u0395": "E", "\u0396": "Z", "\u0397": "H", "\u0399": "I",
              "\u039a": "K", "\u039c": "M", "\u039d": "N", "\u039f": "O", "\u03a1": "P", "\u03a4": "T", "\u03a5": "Y",
              "\u03a7": "X", "\u03bf": "o", "\u03bd": "v"}
_ASCII_NAMES = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_", min_size=1, max_size=24)


@settings(max_examples=examples(300), deadline=None)
@given(_ASCII_NAMES, st.data())
def test_an_ascii_name_with_any_of_its_letters_imitated_is_refused(name: str, data: st.DataObject) -> None:
    spots = [i for i, c in enumerate(name) if c in IMITATIONS.values()]
    if not spots:
        name, spots = name + "e", [len(name)]
    chosen = data.draw(st.lists(st.sampled_from(spots), min_size=1, unique=True))
    fake = "".join(data.draw(st.sampled_from([k for k, v in IMITATIONS.items() if v == c])) if i in chosen else c
                   for i, c in enumerate(name))
    has_ascii_letter = any(c.isalpha() and c.isascii() for c in fake)
    # Alone: refused when ASCII letters stay beside the imitation; a name all in one script is fine.
    if has_ascii_letter:
        with pytest.raises(SchemaConversionError, match="mixes scripts: U\\+") as caught:
            to_tools([tool(fake)])
        assert str(caught.value).isprintable()
    else:
        assert [t.name for t in to_tools([tool(fake)])] == [fake]
    # Beside the name it imitates: always refused, in either order.
    for pair in ([name, fake], [fake, name]):
        with pytest.raises(SchemaConversionError, match="mixes scripts|differ only by invisible or look-alike"):
            to_tools([tool(n) for n in pair])


@pytest.mark.parametrize(("real", "twin"), [
    ("copy", "\u0441\u043e\u0440\u0443"), ("ABE", "\u0391\u0392\u0395"), ("IO", "\u0399\u039f"), ("xp", "\u0445\u0440"),
])
def test_a_name_in_another_script_that_reads_as_a_tools_name_is_refused(real: str, twin: str) -> None:
    assert [t.name for t in to_tools([tool(twin)])] == [twin]  # alone, a name in one script is a name
    with pytest.raises(SchemaConversionError) as caught:
        to_tools([tool(real), tool(twin)])
    assert "differ only by invisible or look-alike characters" in str(caught.value) and repr(twin) in str(caught.value)


def test_a_mixed_script_name_says_which_letter_imitates_which() -> None:
    with pytest.raises(SchemaConversionError) as caught:
        to_tools([tool("g\u0435t_current_time")])
    assert "U+0435 CYRILLIC SMALL LETTER IE looks like the ASCII 'e'" in str(caught.value)
    assert "write the name in one script" in str(caught.value)


def test_names_in_other_scripts_and_mixes_without_an_imitation_are_kept() -> None:
    names = ["\u043f\u043e\u043b\u0443\u0447\u0438\u0442\u044c_\u043f\u043e\u0433\u043e\u0434\u0443", "calc_\u03c0",
             "get_\u5929\u6c17", "\u5929\u6c17\u3092\u8abf\u3079\u308b", "\ub0a0\uc528_\uc870\ud68c", "\u03b4_value",
             "get_time_\u00b5s", "na\u00efve_bayes", "stra\u00dfe", "get_\u03a9mega"]
    assert [t.name for t in to_tools([tool(n) for n in names])] == names


def test_a_name_with_nothing_visible_is_refused() -> None:
    with pytest.raises(SchemaConversionError, match="no visible character"):
        to_tools([tool("\u200b\u200c")])


def test_the_engine_refuses_them_at_bind_time() -> None:
    engine = HammerEngine(backend=ScriptedBackend(["[]"]))
    with pytest.raises(SchemaConversionError, match="differ only by invisible"):
        engine.generate([Message.user("time?")], tools=[tool("get_current_time"), tool("get_current_time\u200b")])


def test_name_key_is_what_a_person_sees() -> None:
    assert name_key("\ufb01nd") == "find" and name_key("a\u00a0\u00a0b") == "a b"
    assert name_key("e\u0301") == name_key("\u00e9") == unicodedata.normalize("NFC", "e\u0301")


# ------------------------------------------------------------------ hammer chat's confirmation
def test_the_confirmation_prompt_shows_the_name_escaped(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    asked: list[str] = []
    monkeypatch.setattr("builtins.input", lambda prompt: asked.append(prompt) or "n")
    call = ToolCall(name=ESCAPE_NAME, arguments={})
    assert not _may_run(argparse.Namespace(yes=False), call, interactive=True)
    assert asked == ["  run time\\x1b]0;pwned\\x07\\x1b[2J\\x1b[1;1Hnow? [y/N] "]
    assert not _may_run(argparse.Namespace(yes=False), call, interactive=False)
    err = capsys.readouterr().err
    assert "\x1b" not in err and "not run: time\\x1b]0;pwned" in err
