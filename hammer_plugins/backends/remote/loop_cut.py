"""The loop guard for a server that decodes the grammar itself.

An in-process backend runs :class:`~hammer_plugins.grammar.loop_guard.LoopGuard` inside its decoding loop: a call list
that starts repeating its calls is closed there, and the engine keeps the calls made so far. llama-server
and vLLM decode under the grammar on their side, where no such guard runs, so a small model's repeating
list went on until ``max_tokens`` (measured: the stand-in answered Codex CLI's prompt with ``get_goal``,
``create_goal``, ``update_goal`` over and over, and the cut answer reached Codex as an incomplete response).
Here the streamed text is followed with the same guard. At the end of the call that repeats, the stream
stops: closing it makes the server stop generating. The last chunk carries ``loop_guard_stop``, as an in-process
backend's does, so the engine keeps the calls made so far and drops the repeated tail.

A loop inside a string value is left to ``max_tokens``: an in-process backend closes the string by masking
tokens, which a server that samples by itself cannot be made to do.

Example:
    >>> from hammer_plugins.backends.base import GenerationChunk
    >>> cut = ListLoopCut(prompt_tokens=12)
    >>> calls = ['[{"name": "a", "arguments": {}}, ', '{"name": "b", "arguments": {}}, ',
    ...          '{"name": "a", "arguments": {}}, {"name": "b"']
    >>> out = [c for text in calls for c in cut.take(GenerationChunk(text=text))]
    >>> cut.done, out[-2].text, out[-1].finish_reason, out[-1].decoding.loop_guard_stopped
    (True, '{"name": "a", "arguments": {}}', 'stop', True)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

from hammer_plugins.backends.base import GenerationChunk, Usage
from hammer_plugins.grammar.loop_guard import LoopGuard
from hammer_plugins.output.decoding import Decoding


class ListLoopCut:
    """Follows a streamed constrained answer; :meth:`take` passes chunks on until the call list loops.

    ``prompt_tokens`` goes into the usage of the closing chunk it writes (the server's own usage never
    arrives once the stream is closed); the completion is counted as one token per streamed chunk, which
    is what llama-server and vLLM send.
    """

    def __init__(self, prompt_tokens: int | None = None) -> None:
        self.guard = LoopGuard()
        self.prompt_tokens = prompt_tokens or 0
        self.completion_tokens = 0
        self.done = False

    def take(self, chunk: GenerationChunk) -> list[GenerationChunk]:
        """What to pass on for ``chunk``. Once the list loops: the text up to the end of the repeating
        call, then a closing chunk; :attr:`done` is set and the caller stops reading."""
        if self.done:
            return []
        if not chunk.text or chunk.finish_reason is not None or chunk.usage is not None:
            return [chunk]
        self.completion_tokens += 1
        for at, char in enumerate(chunk.text):
            self.guard.feed(char.encode())
            if self.guard.list_looping:
                self.done = True
                end = GenerationChunk(text="", finish_reason="stop", decoding=Decoding(loop_guard_stopped=True),
                                      usage=Usage(prompt_tokens=self.prompt_tokens,
                                                  completion_tokens=self.completion_tokens))
                return [GenerationChunk(text=chunk.text[:at + 1]), end]
        return [chunk]


def cut_list_loops(chunks: Iterator[GenerationChunk], cut: ListLoopCut) -> Iterator[GenerationChunk]:
    """``chunks`` until ``cut`` ends them; the stream is closed either way (the server stops generating)."""
    try:
        for chunk in chunks:
            yield from cut.take(chunk)
            if cut.done:
                return
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()


async def acut_list_loops(chunks: AsyncIterator[GenerationChunk], cut: ListLoopCut) -> AsyncIterator[GenerationChunk]:
    """Async :func:`cut_list_loops`."""
    try:
        async for chunk in chunks:
            for out in cut.take(chunk):
                yield out
            if cut.done:
                return
    finally:
        close = getattr(chunks, "aclose", None)
        if close is not None:
            await close()
