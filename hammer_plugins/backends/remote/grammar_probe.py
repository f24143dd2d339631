"""Which field the server reads a grammar from, checked once by a probe that the grammar is applied.

Example:
    >>> from hammer_plugins.backends.remote import OpenAICompatibleBackend
    >>> issubclass(OpenAICompatibleBackend, ServerGrammarProbe)
    True
"""

from __future__ import annotations

from typing import Any

from hammer_plugins.backends.base import GenerationSettings
from hammer_plugins.backends.remote.settings import GrammarProtocol
from hammer_plugins.backends.remote.state import ServerState
from hammer_plugins.values.errors import (
    GrammarNotSupportedError,
    ServerHTTPError,
)

_PROBE_TEXT = "hammer grammar probe"
_PROBE_GRAMMAR = f'root ::= "{_PROBE_TEXT}"'
_PROBE_PROMPT = "<|im_start|>user\nSay hello.<|im_end|>\n<|im_start|>assistant\n"


class ServerGrammarProbe(ServerState):
    """Which field the server reads a grammar from, checked once by a probe that the grammar is applied.
    Part of :class:`~hammer_plugins.backends.remote.OpenAICompatibleBackend`
    (a mixin over :class:`~.state.ServerState`, under the backend's setup lock).

    Example:
        >>> ServerGrammarProbe.__name__
        'ServerGrammarProbe'
    """

    @staticmethod
    def _grammar_fields(protocol: GrammarProtocol | None, grammar: str | None) -> dict[str, Any]:
        if grammar is None or protocol in (None, "none", "auto"):
            return {}
        if protocol == "llama_cpp":
            return {"grammar": grammar}
        if protocol == "vllm":
            return {"structured_outputs": {"grammar": grammar}}
        return {"guided_grammar": grammar}

    def _candidates(self) -> list[GrammarProtocol]:
        wanted = self.settings.grammar_protocol
        if wanted != "auto":
            return [wanted]
        return list(self._dialect.grammar_protocols)

    def resolve_grammar_protocol(self) -> GrammarProtocol:
        """Find (once) the grammar protocol the server applies, by a probe; raise if it applies none.

        The probe asks for a short completion under a grammar that allows one fixed sentence: a server
        that ignores the grammar field answers something else.
        """
        if self._protocol is not None:
            return self._protocol
        with self._setup_lock:
            if self._protocol is not None:
                return self._protocol
            self.load()
            tried: list[str] = []
            for candidate in self._candidates():
                outcome = self._probe(candidate)
                if outcome is None:
                    self._protocol = candidate
                    return candidate
                tried.append(f"{candidate}: {outcome}")
            raise GrammarNotSupportedError(
                f"the server at {self.base_url} ({self._dialect.kind}) did not apply a grammar under any protocol tried "
                f"({'; '.join(tried)}). Fix: set grammar_protocol to what the server supports ('llama_cpp' for "
                "llama-server and llama-cpp-python, 'vllm' for vLLM >= 0.10.2, 'vllm_guided' for older vLLM), or "
                "run unconstrained with HammerEngine(constrained=False) (the parser still reads lenient output).",
                url=self.base_url)

    def _probe(self, protocol: GrammarProtocol) -> str | None:
        """None if the server applied the probe grammar under ``protocol``, else what happened."""
        settings = GenerationSettings(max_tokens=32, temperature=0.0)
        body = self._completion_body(_PROBE_PROMPT, settings, self._grammar_fields(protocol, _PROBE_GRAMMAR))
        try:
            text = "".join(chunk.text for chunk in self._connection.drive(self._completion(body, _PROBE_PROMPT, settings)))
        except ServerHTTPError as exc:
            return f"HTTP {exc.status_code}: {exc.detail[:200]}"
        return None if text.strip() == _PROBE_TEXT else f"answered {text[:60]!r}, ignoring the grammar"
