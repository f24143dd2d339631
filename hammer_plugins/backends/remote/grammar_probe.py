"""Which field the server reads a grammar from, checked once by a probe that the grammar is applied.

Example:
    >>> grammar_fields("vllm", 'root ::= "x"')
    {'structured_outputs': {'grammar': 'root ::= "x"'}}
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hammer_plugins.backends.base import GenerationSettings
from hammer_plugins.backends.remote.connection import ServerConnection
from hammer_plugins.backends.remote.facts import ServerFacts
from hammer_plugins.backends.remote.sansio import _Core
from hammer_plugins.backends.remote.settings import GrammarProtocol, ServerBackendSettings
from hammer_plugins.values.errors import GrammarNotSupportedError, ServerHTTPError

_PROBE_TEXT = "hammer grammar probe"
_PROBE_GRAMMAR = f'root ::= "{_PROBE_TEXT}"'
_PROBE_PROMPT = "<|im_start|>user\nSay hello.<|im_end|>\n<|im_start|>assistant\n"

Completion = Callable[[str, GenerationSettings, dict[str, Any]], _Core[None]]
"""One completion of a prompt (sent as it is) under these settings, with these grammar fields in its body."""


def grammar_fields(protocol: GrammarProtocol | None, grammar: str | None) -> dict[str, Any]:
    """The fields of a completion body that carry ``grammar`` under ``protocol`` (none without either).

    Example:
        >>> grammar_fields("llama_cpp", 'root ::= "x"'), grammar_fields("none", 'root ::= "x"')
        ({'grammar': 'root ::= "x"'}, {})
    """
    if grammar is None or protocol in (None, "none", "auto"):
        return {}
    if protocol == "llama_cpp":
        return {"grammar": grammar}
    if protocol == "vllm":
        return {"structured_outputs": {"grammar": grammar}}
    return {"guided_grammar": grammar}


class ServerGrammarProbe:
    """The grammar-protocol job of :class:`~hammer_plugins.backends.remote.OpenAICompatibleBackend` (its
    ``grammar_probe``): finds, once, the field the server reads a grammar from, by a probe completion
    (``complete``, driven on ``connection``), and keeps it in the backend's :class:`~.facts.ServerFacts`.
    ``load`` runs discovery, if still due (the candidates depend on the server's kind).

    Example:
        >>> from hammer_plugins.backends.remote import OpenAICompatibleBackend
        >>> backend = OpenAICompatibleBackend("http://127.0.0.1:8080", model="m", grammar_protocol="llama_cpp",
        ...                                   verify_grammar=False)
        >>> backend.grammar_probe.resolve()            # trusted as set: no probe, nothing contacted
        'llama_cpp'
    """

    def __init__(self, settings: ServerBackendSettings, facts: ServerFacts, connection: ServerConnection,
                 load: Callable[[], None], complete: Completion) -> None:
        self.settings = settings
        self.facts = facts
        self.connection = connection
        self.load = load
        self.complete = complete

    def _candidates(self) -> list[GrammarProtocol]:
        wanted = self.settings.grammar_protocol
        if wanted != "auto":
            return [wanted]
        return list(self.facts.dialect.grammar_protocols)

    def resolve(self) -> GrammarProtocol:
        """Find (once) the grammar protocol the server applies, by a probe; raise if it applies none.

        The probe asks for a short completion under a grammar that allows one fixed sentence: a server
        that ignores the grammar field answers something else.
        """
        facts = self.facts
        if facts.protocol is not None:
            return facts.protocol
        with facts.lock:
            if facts.protocol is not None:
                return facts.protocol
            self.load()
            tried: list[str] = []
            for candidate in self._candidates():
                outcome = self._probe(candidate)
                if outcome is None:
                    facts.protocol = candidate
                    return candidate
                tried.append(f"{candidate}: {outcome}")
            url = self.settings.base_url
            raise GrammarNotSupportedError(
                f"the server at {url} ({facts.dialect.kind}) did not apply a grammar under any protocol tried "
                f"({'; '.join(tried)}). Fix: set grammar_protocol to what the server supports ('llama_cpp' for "
                "llama-server and llama-cpp-python, 'vllm' for vLLM >= 0.10.2, 'vllm_guided' for older vLLM), or "
                "run unconstrained with HammerEngine(constrained=False) (the parser still reads lenient output).",
                url=url)

    def _probe(self, protocol: GrammarProtocol) -> str | None:
        """None if the server applied the probe grammar under ``protocol``, else what happened."""
        settings = GenerationSettings(max_tokens=32, temperature=0.0)
        core = self.complete(_PROBE_PROMPT, settings, grammar_fields(protocol, _PROBE_GRAMMAR))
        try:
            text = "".join(chunk.text for chunk in self.connection.drive(core))
        except ServerHTTPError as exc:
            return f"HTTP {exc.status_code}: {exc.detail[:200]}"
        return None if text.strip() == _PROBE_TEXT else f"answered {text[:60]!r}, ignoring the grammar"
