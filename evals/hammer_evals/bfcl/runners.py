"""The ways of calling one GGUF model that ``hammer bench`` puts side by side.

* :class:`ChatHammerRunner`: our LangChain chat model (constrained decoding and masking on or off).
* :class:`ChatLlamaCppRunner`: LangChain's ``ChatLlamaCpp`` with llama-cpp-python's
  ``chatml-function-calling`` format, tools bound with ``bind_tools`` (tool_choice left unset:
  ChatLlamaCpp rejects ``"auto"``).
* :class:`LlamaCppToolsRunner`: llama-cpp-python's own ``create_chat_completion(tools=...)`` with the
  chat template embedded in the GGUF, its ``<tool_call>`` tags parsed the way Qwen2.5 users do
  (Hermes style: one JSON ``{"name", "arguments"}`` object per tag).

LangChain is imported inside the runners' constructors only, so importing this module stays
framework-free.

Example:
    >>> parse_tool_call_tags('<tool_call>\\n{"name": "f", "arguments": {"x": 1}}\\n</tool_call>')
    ([('f', {'x': 1})], False)
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any, Protocol

from pydantic import BaseModel, Field

from ..model_unavailable import BENCH_FIX, CANNOT_RUN, unavailable
from .bfcl import BfclEntry, to_bfcl_output, to_openai_tool, to_tool_spec

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"


def _tagged_blocks(text: str) -> list[str]:
    """The stripped text of each ``<tool_call>`` block (an unclosed last one runs to the end). With str.find,
    not the regex ``<tool_call>\\s*(.*?)\\s*(?:</tool_call>|$)``, which is quadratic in a run of whitespace
    the model writes (40 kB: 23 s)."""
    blocks: list[str] = []
    start = text.find(_OPEN)
    while start >= 0:
        end = text.find(_CLOSE, start + len(_OPEN))
        blocks.append(text[start + len(_OPEN): end if end >= 0 else len(text)].strip())
        start = -1 if end < 0 else text.find(_OPEN, end + len(_CLOSE))
    return blocks


class Outcome(BaseModel):
    """One runner's answer to one question."""

    calls: list[tuple[str, dict[str, Any]]] = Field(default_factory=list)
    malformed: bool = False
    """The model tried to call (a call syntax was present) but the call could not be decoded."""
    truncated: bool = False
    """The answer stopped at ``max_tokens`` (finish reason ``length``)."""
    raw: str = ""
    latency_s: float = 0.0
    error: str = ""

    @property
    def bfcl_output(self) -> list[dict[str, dict[str, Any]]]:
        return to_bfcl_output(self.calls)


class Runner(Protocol):
    """Anything that answers a BFCL question."""

    name: str

    def answer(self, entry: BfclEntry) -> Outcome: ...


def parse_tool_call_tags(text: str) -> tuple[list[tuple[str, dict[str, Any]]], bool]:
    """Hermes-style ``<tool_call>{json}</tool_call>`` blocks: (calls, malformed)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    malformed = False
    for block in _tagged_blocks(text):
        try:
            item = json.loads(block)
            args = item.get("arguments", item.get("parameters", {}))
            if isinstance(args, str):
                args = json.loads(args)
            if not isinstance(item.get("name"), str) or not isinstance(args, Mapping):
                raise ValueError("no name or non-object arguments")
            calls.append((item["name"], dict(args)))
        except (ValueError, AttributeError):
            malformed = True
    return calls, malformed


def _messages(entry: BfclEntry) -> list[dict[str, str]]:
    return [{"role": m["role"], "content": m["content"]} for m in entry.question]


def _from_ai_message(message: Any, started: float) -> Outcome:
    calls = [(c["name"], dict(c["args"])) for c in message.tool_calls]
    raw = message.response_metadata.get("raw_output") if isinstance(message.response_metadata, Mapping) else None
    content = message.content if isinstance(message.content, str) else json.dumps(message.content)
    finish = message.response_metadata.get("finish_reason") if isinstance(message.response_metadata, Mapping) else None
    return Outcome(calls=calls, malformed=bool(message.invalid_tool_calls), raw=(raw or content)[:2000],
                   truncated=finish == "length", latency_s=time.perf_counter() - started)


class ChatHammerRunner:
    """ChatHammer (``integrations/langchain_hammer``) on a GGUF file.

    Example:
        >>> ChatHammerRunner("m.gguf", constrained=False, mask_names=True).name  # doctest: +SKIP
        'ChatHammer (constrained off, masking on)'
    """

    def __init__(self, model_path: str, *, constrained: bool = True, mask_names: bool = False,
                 loop_guard: bool = True, repeat_penalty: float = 1.0, on_missing: str | None = None,
                 max_tokens: int = 256, n_ctx: int = 8192, n_threads: int | None = None,
                 base_url: str | None = None) -> None:
        from langchain_hammer import ChatHammer

        variant = "" if loop_guard else ", loop guard off"
        variant += f", repeat penalty {repeat_penalty}" if repeat_penalty != 1.0 else ""
        variant += f", on_missing={on_missing}" if on_missing else ""
        self.name = (f"ChatHammer (constrained {'on' if constrained else 'off'}, "
                     f"masking {'on' if mask_names else 'off'}{variant})")
        where: dict[str, Any] = {"model_path": model_path, "n_ctx": n_ctx, "n_threads": n_threads}
        if base_url:  # the model as a server serves it: answers can be asked concurrently
            where = {"backend": "server", "base_url": base_url}
        self.concurrent = bool(base_url)
        # Every function the question gives is offered (tool_budget=0): BFCL measures the model on them.
        if on_missing:  # unset: ChatHammer's own default
            where["on_missing"] = on_missing
        self.llm = ChatHammer(constrained=constrained, mask_names=mask_names, loop_guard=loop_guard,
                              repeat_penalty=repeat_penalty, max_tokens=max_tokens, temperature=0.0, tool_budget=0,
                              **where)

    def answer(self, entry: BfclEntry) -> Outcome:
        bound = self.llm.bind_tools([to_tool_spec(f) for f in entry.functions])
        started = time.perf_counter()
        try:
            message = bound.invoke(_messages(entry))
        except CANNOT_RUN as exc:  # no answer at all: the run stops (model_unavailable says why)
            raise unavailable(self.name, exc, BENCH_FIX) from exc
        except Exception as exc:  # noqa: BLE001 - a failure is a malformed answer, recorded
            return Outcome(malformed=True, error=f"{type(exc).__name__}: {exc}"[:500],
                           latency_s=time.perf_counter() - started)
        return _from_ai_message(message, started)


class ChatLlamaCppRunner:
    """LangChain's ChatLlamaCpp with ``chat_format="chatml-function-calling"`` (what its docs show)."""

    name = "ChatLlamaCpp (chatml-function-calling)"

    def __init__(self, model_path: str, *, max_tokens: int = 256, n_ctx: int = 8192, n_threads: int | None = None) -> None:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from langchain_community.chat_models import ChatLlamaCpp

        self.llm = ChatLlamaCpp(model_path=model_path, chat_format="chatml-function-calling", temperature=0.0,
                                max_tokens=max_tokens, n_ctx=n_ctx, n_threads=n_threads, verbose=False)

    def answer(self, entry: BfclEntry) -> Outcome:
        bound = self.llm.bind_tools([to_openai_tool(f) for f in entry.functions])
        started = time.perf_counter()
        try:
            message = bound.invoke(_messages(entry))
        except CANNOT_RUN as exc:
            raise unavailable(self.name, exc, BENCH_FIX) from exc
        except Exception as exc:  # noqa: BLE001
            return Outcome(malformed=True, error=f"{type(exc).__name__}: {exc}"[:500],
                           latency_s=time.perf_counter() - started)
        return _from_ai_message(message, started)


class LlamaCppToolsRunner:
    """llama-cpp-python ``create_chat_completion(tools=...)`` with the GGUF's own chat template."""

    name = "llama-cpp-python tools + embedded template"

    def __init__(self, model_path: str, *, max_tokens: int = 256, n_ctx: int = 8192, n_threads: int | None = None) -> None:
        import llama_cpp

        self.max_tokens = max_tokens
        self.llama = llama_cpp.Llama(model_path=model_path, n_ctx=n_ctx, n_threads=n_threads, verbose=False)

    def answer(self, entry: BfclEntry) -> Outcome:
        tools = [to_openai_tool(f) for f in entry.functions]
        started = time.perf_counter()
        try:
            result = self.llama.create_chat_completion(messages=_messages(entry), tools=tools, temperature=0.0,
                                                       max_tokens=self.max_tokens)
        except CANNOT_RUN as exc:
            raise unavailable(self.name, exc, BENCH_FIX) from exc
        except Exception as exc:  # noqa: BLE001
            return Outcome(malformed=True, error=f"{type(exc).__name__}: {exc}"[:500],
                           latency_s=time.perf_counter() - started)
        latency = time.perf_counter() - started
        message = result["choices"][0]["message"]
        text = message.get("content") or ""
        calls, malformed = parse_tool_call_tags(text)
        return Outcome(calls=calls, malformed=malformed, raw=text[:2000], latency_s=latency,
                       truncated=result["choices"][0].get("finish_reason") == "length")


def make_runner(kind: str, model_path: str, *, max_tokens: int = 256, n_ctx: int = 8192,
                n_threads: int | None = None, base_url: str | None = None) -> Runner:
    """A runner by its short name: ``hammer``, ``hammer-free``, ``hammer-mask``, ``hammer-free-mask``,
    ``chatllamacpp``, ``llamacpp-tools``; and for measuring the loop guard (constrained, masking off),
    ``hammer-noguard`` (guard off) and ``hammer-penalty`` (guard off, repeat_penalty 1.1); for measuring the
    ask-or-call rule, ``hammer-call`` and ``hammer-ask`` (``on_missing`` set either way, whatever the default).
    ``base_url``: the ChatHammer runners ask this server instead of loading the model (the others
    still load ``model_path``)."""
    try:
        return _make_runner(kind, model_path, max_tokens=max_tokens, n_ctx=n_ctx, n_threads=n_threads,
                            base_url=base_url)
    except CANNOT_RUN as exc:  # e.g. ChatLlamaCpp without llama-cpp-python: no question can be asked
        raise unavailable(kind, exc, BENCH_FIX) from exc


def _make_runner(kind: str, model_path: str, *, max_tokens: int, n_ctx: int, n_threads: int | None,
                 base_url: str | None) -> Runner:
    opts: dict[str, Any] = {"max_tokens": max_tokens, "n_ctx": n_ctx, "n_threads": n_threads}
    if kind in ("hammer-noguard", "hammer-penalty"):
        # The loop guard's comparison points: no guard, and the old remedy (a repeat penalty of 1.1).
        return ChatHammerRunner(model_path, loop_guard=False, repeat_penalty=1.1 if kind == "hammer-penalty" else 1.0,
                                base_url=base_url, **opts)
    if kind in ("hammer-call", "hammer-ask"):
        return ChatHammerRunner(model_path, on_missing=kind.removeprefix("hammer-"), base_url=base_url, **opts)
    if kind.startswith("hammer"):
        return ChatHammerRunner(model_path, constrained="free" not in kind, mask_names="mask" in kind,
                                base_url=base_url, **opts)
    if kind == "chatllamacpp":
        return ChatLlamaCppRunner(model_path, **opts)
    if kind == "llamacpp-tools":
        return LlamaCppToolsRunner(model_path, **opts)
    raise ValueError(f"unknown runner {kind!r}; use one of {RUNNERS + EXTRA_RUNNERS}")


RUNNERS: tuple[str, ...] = ("hammer", "hammer-free", "hammer-mask", "hammer-free-mask", "chatllamacpp", "llamacpp-tools")
EXTRA_RUNNERS: tuple[str, ...] = ("hammer-noguard", "hammer-penalty", "hammer-call", "hammer-ask")
"""Runners for one measurement each (the loop guard; the ask-or-call rule), not part of the default side-by-side set."""
