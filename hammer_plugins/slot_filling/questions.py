"""The question that asks for missing values, in the user's language.

The engine's ask-or-call rule (:mod:`hammer_plugins.engine.missing`) answers a call that lacks required
values with a short question naming each one. The names are the parameters' descriptions
(:func:`~hammer_plugins.slot_filling.snapshots.slot_phrase`); the sentence around them is a template in
the language the user wrote in (:func:`language_of`: the script, then common words), English when unsure.
A template per language, not a model pass: it costs nothing and cannot invent a value.

Example:
    >>> from hammer_plugins.tools.definition import Tool
    >>> tool = Tool(name="pay_fine", parameters={"type": "object", "properties": {
    ...     "plate": {"type": "string", "description": "License plate number"},
    ...     "city": {"type": "string", "description": "Violating city"}}})
    >>> missing_question([(tool, ["plate", "city"])], language_of("Pay my traffic fine"))
    'Please provide the license plate number and the violating city.'
    >>> missing_question([(tool, ["plate"])], language_of("Quiero pagar mi multa"))
    'Por favor, indique: license plate number.'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hammer_plugins.slot_filling.snapshots import slot_phrase
from hammer_plugins.tools.definition import Tool

Language = str
"""A language code: ``"en"``, ``"zh"``, ``"es"``, ``"fr"``, ``"de"`` (:data:`TEMPLATES`' keys)."""

TEMPLATES: dict[Language, tuple[str, str, str]] = {
    # (sentence with {names}, separator, last separator); English keeps the article slot_phrase leaves out.
    "en": ("Please provide {names}.", ", ", " and "),
    "zh": ("请提供：{names}。", "、", "和"),
    "es": ("Por favor, indique: {names}.", ", ", " y "),
    "fr": ("Veuillez préciser : {names}.", ", ", " et "),
    "de": ("Bitte geben Sie an: {names}.", ", ", " und "),
}

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
# Short, frequent words of each language that the others rarely use (articles, pronouns, prepositions).
_WORDS: dict[Language, frozenset[str]] = {
    "es": frozenset("el los las una por para quiero mi mis del con qué cuál es está y necesito pagar hola".split()),
    "fr": frozenset("le les une pour je mon ma mes du avec est et vous veux voudrais bonjour quel quelle".split()),
    "de": frozenset("der die das ein eine ich mein meine mit ist und für bitte möchte nicht wie welche".split()),
    "en": frozenset("the a an my for with is and i please what which to of in".split()),
}
_LETTERS: dict[Language, str] = {"es": "ñ¿¡", "fr": "çœàèù", "de": "ßäöü"}


def language_of(text: str) -> Language:
    """The language of ``text`` among :data:`TEMPLATES`' keys: Chinese characters, else the language with
    the most of its common words and letters; English when nothing tells.

    Example:
        >>> [language_of(t) for t in ("帮我交罚款", "Je veux payer mon amende", "Ich möchte meine Strafe zahlen",
        ...                           "Pay my fine", "")]
        ['zh', 'fr', 'de', 'en', 'en']
    """
    if _CJK.search(text):
        return "zh"
    lowered = text.casefold()
    words = _WORD.findall(lowered)
    scores = {lang: sum(w in common for w in words) + 2 * sum(ch in lowered for ch in _LETTERS.get(lang, ""))
              for lang, common in _WORDS.items()}
    best = max(scores, key=lambda lang: (scores[lang], lang == "en"))
    return best if scores[best] > 0 else "en"


def missing_question(missing: Sequence[tuple[Tool, Sequence[str]]], language: Language = "en") -> str:
    """One question naming every missing value of every held-back call (``(tool, missing names)`` pairs),
    in ``language`` (:data:`TEMPLATES`; an unknown one is English). A name given twice is asked once.

    Example:
        >>> tool = Tool(name="f", parameters={"type": "object", "properties": {"city": {"type": "string"}}})
        >>> missing_question([(tool, ["city"])], "zh")
        '请提供：city。'
    """
    sentence, sep, last = TEMPLATES.get(language, TEMPLATES["en"])
    phrases: list[str] = []
    for tool, names in missing:
        for name in names:
            phrase = slot_phrase(name, tool.properties.get(name, {}))
            phrase = f"the {phrase}" if sentence is TEMPLATES["en"][0] else phrase
            if phrase not in phrases:
                phrases.append(phrase)
    if not phrases:
        return ""
    joined = phrases[0] if len(phrases) == 1 else sep.join(phrases[:-1]) + last + phrases[-1]
    return sentence.format(names=joined)


__all__ = ["TEMPLATES", "Language", "language_of", "missing_question"]
