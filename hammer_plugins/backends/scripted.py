"""A backend that replays scripted answers: for testing logic built on the engine, no model.

It records every prompt and grammar it was given, so tests can check what the engine sent.

Example:
    >>> from hammer_plugins import HammerEngine, Message
    >>> from hammer_plugins.backends.scripted import ScriptedBackend
    >>> engine = HammerEngine(backend=ScriptedBackend(['[{"name": "ping", "arguments": {}}]']))
    >>> engine.generate([Message.user("ping")], tools=[{"name": "ping", "parameters": {}}]).tool_calls[0].name
    'ping'
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence

from hammer_plugins.backends.base import Backend, GenerationChunk, GenerationSettings, Usage
from hammer_plugins.grammar.builder import Grammar


class ScriptedBackend(Backend):
    """Answers with the next scripted text (or what ``responder(prompt)`` returns), token by token.
    With ``prefix_cache=True`` its usage says the prompt tokens it shares with the one before came from a
    cache (``usage.cached_prompt_tokens``), as a local runtime's KV cache does.

    Example:
        >>> backend = ScriptedBackend(["hello there"])
        >>> "".join(c.text for c in backend.stream("prompt", GenerationSettings())), backend.prompts
        ('hello there', ['prompt'])
        >>> cached = ScriptedBackend(["a", "b"], prefix_cache=True)
        >>> [list(cached.stream("the same long prompt", GenerationSettings()))[-1].usage.cached_prompt_tokens
        ...  for _ in range(2)]
        [0, 4]
    """

    name = "scripted"

    def __init__(
        self,
        responses: Sequence[str] = (),
        responder: Callable[[str], str] | None = None,
        context_window: int = 32768,
        prefix_cache: bool = False,
    ) -> None:
        super().__init__()
        self._responses = list(responses)
        self._responder = responder
        self._context_window = context_window
        self._prefix_cache = prefix_cache
        self.prompts: list[str] = []
        self.grammars: list[Grammar | None] = []
        self.settings: list[GenerationSettings] = []

    @property
    def model_name(self) -> str:
        return "scripted"

    @property
    def context_window(self) -> int:
        return self._context_window

    def load(self) -> None:
        return None

    def count_tokens(self, text: str) -> int:
        # Roughly four characters a token, enough for context checks in tests.
        return max(1, len(text) // 4)

    def tokenize(self, text: str) -> list[int]:
        return [ord(c) for c in text[3::4]] or [0]  # as many "tokens" as count_tokens says

    def _cached(self, prompt: str) -> int:
        """With ``prefix_cache``: the tokens of the prompt the last one began with, as a runtime's KV cache
        would reuse them (all but the last token at most)."""
        if not self._prefix_cache or len(self.prompts) < 2:
            return 0
        shared = os.path.commonprefix([self.prompts[-2], prompt])
        return min(len(shared) // 4, self.count_tokens(prompt) - 1)

    def _stream(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None) -> Iterator[GenerationChunk]:
        self.prompts.append(prompt)
        self.grammars.append(grammar)
        self.settings.append(settings)
        if self._responder is not None:
            answer = self._responder(prompt)
        elif self._responses:
            answer = self._responses.pop(0)
        else:
            raise RuntimeError("ScriptedBackend ran out of scripted responses")
        words = answer.split(" ")
        pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
        budget = settings.max_tokens
        for piece in pieces[:budget]:
            yield GenerationChunk(text=piece)
        yield GenerationChunk(
            text="",
            finish_reason="length" if len(pieces) > budget else "stop",
            usage=Usage(prompt_tokens=self.count_tokens(prompt), completion_tokens=min(len(pieces), budget),
                        cached_prompt_tokens=self._cached(prompt)),
        )
