"""What differs between the inference servers the backend talks to: one class per kind of server.

The backend speaks the OpenAI completions protocol to all of them; each server adds its own
tokenizer endpoint, grammar field, sampling fields and way of telling its context window. A
dialect holds those differences, so the backend has no per-server branches.

Example:
    >>> dialect_for("vllm").grammar_protocols, dialect_for("llama_server").tokenize_path
    (('vllm', 'vllm_guided'), '/tokenize')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from hammer_plugins.backends.base import GenerationSettings
from hammer_plugins.backends.remote.settings import GrammarProtocol, ServerKind
from hammer_plugins.backends.seeds import LLAMA_CPP_SEEDS, VLLM_SEEDS, in_range


class ServerDialect:
    """A generic OpenAI-compatible server: no tokenizer endpoint, every grammar protocol worth a probe.

    Example:
        >>> ServerDialect().sampling_fields(GenerationSettings())
        {}
    """

    kind: ClassVar[ServerKind] = "openai"
    tokenize_path: ClassVar[str | None] = None
    tokenize_text_key: ClassVar[str] = "input"
    grammar_protocols: ClassVar[tuple[GrammarProtocol, ...]] = ("llama_cpp", "vllm", "vllm_guided")
    needs_props: ClassVar[bool] = False
    """Its context window is in ``/props`` (llama-server), read once at discovery."""
    stream_break_cause: ClassVar[str] = "The server stopped or a proxy cut the connection"
    seeds: ClassVar[int | None] = None
    """How many seeds the server tells apart (None: not known, a seed is sent as it is)."""

    def seed(self, seed: int) -> int:
        """The request's seed as sent: hashed into the server's range when beyond it (:mod:`~hammer_plugins.backends.seeds`).

        Example:
            >>> dialect_for("llama_server").seed(2**32 + 5) != 5, dialect_for("vllm").seed(2**63) < 2**63
            (True, True)
        """
        return seed if self.seeds is None else in_range(seed, self.seeds)

    def tokenize_extra(self, model: str | None) -> dict[str, Any]:
        """The tokenize request's fields besides the text."""
        return {"model": model}

    def sampling_fields(self, settings: GenerationSettings) -> dict[str, Any]:
        """Completion fields beyond OpenAI's (``top_k``, ``repeat_penalty``, ...), in this server's spelling."""
        return {}

    def context_window(self, model_entry: Mapping[str, Any], props: Mapping[str, Any] | None) -> int | None:
        """The context window the server reports, from its ``/v1/models`` entry or ``/props``."""
        return None

    def prefill(self, prompt: str) -> tuple[str, dict[str, Any]] | None:
        """The request (path, body) that has the server evaluate ``prompt`` and keep its state for a later
        prompt that begins with it, generating nothing; None: this server is not known to keep it."""
        return None


class AutoDialect(ServerDialect):
    """Before discovery: the kind is not known yet (its stream error names llama-cpp-python's cause too)."""

    kind = "auto"
    stream_break_cause = ("The server stopped, a proxy cut the connection, or (llama-cpp-python) another request "
                          "arrived: its server cuts a running stream then unless started with --interrupt_requests False")


class LlamaCppPythonDialect(ServerDialect):
    """llama-cpp-python's ``python -m llama_cpp.server``: llama.cpp's grammar field, a token-count endpoint."""

    kind = "llama_cpp_python"
    tokenize_path = "/extras/tokenize/count"
    seeds = LLAMA_CPP_SEEDS
    grammar_protocols = ("llama_cpp",)
    stream_break_cause = AutoDialect.stream_break_cause

    def sampling_fields(self, settings: GenerationSettings) -> dict[str, Any]:
        # Its server fixes repeat_last_n at start-up (64), so it is not sent.
        return {"top_k": settings.top_k, "repeat_penalty": settings.repeat_penalty}


class LlamaServerDialect(ServerDialect):
    """llama.cpp's C++ ``llama-server``: llama.cpp's grammar field, ``/tokenize``, the window in ``/props``."""

    kind = "llama_server"
    tokenize_path = "/tokenize"
    seeds = LLAMA_CPP_SEEDS
    tokenize_text_key = "content"
    grammar_protocols = ("llama_cpp",)
    needs_props = True

    def tokenize_extra(self, model: str | None) -> dict[str, Any]:
        return {"add_special": False, "parse_special": True}

    def sampling_fields(self, settings: GenerationSettings) -> dict[str, Any]:
        return {"top_k": settings.top_k, "repeat_penalty": settings.repeat_penalty,
                "repeat_last_n": settings.repeat_last_n}

    def prefill(self, prompt: str) -> tuple[str, dict[str, Any]] | None:
        # Native /completion: n_predict 0 evaluates the prompt and stops (/v1/completions writes a token at least).
        # The slot keeps it; when another prompt takes the slot, the host-memory prompt cache (--cache-ram, 8 GiB
        # by default) keeps it, and a request that begins with it restores it into whichever slot serves it.
        return "/completion", {"prompt": prompt, "n_predict": 0, "cache_prompt": True}

    def context_window(self, model_entry: Mapping[str, Any], props: Mapping[str, Any] | None) -> int | None:
        defaults = (props or {}).get("default_generation_settings") or {}
        window = defaults.get("n_ctx") or (props or {}).get("n_ctx")
        return window if isinstance(window, int) and window > 0 else None


class VllmDialect(ServerDialect):
    """vLLM: ``structured_outputs`` (since 0.10.2) or ``guided_grammar``, ``/tokenize``, ``max_model_len``."""

    kind = "vllm"
    tokenize_path = "/tokenize"
    seeds = VLLM_SEEDS
    tokenize_text_key = "prompt"
    grammar_protocols = ("vllm", "vllm_guided")

    def tokenize_extra(self, model: str | None) -> dict[str, Any]:
        return {"model": model, "add_special_tokens": False}

    def sampling_fields(self, settings: GenerationSettings) -> dict[str, Any]:
        # Not repeat_penalty: vLLM's repetition_penalty covers the whole prompt, Hammer's tools block
        # included, not llama.cpp's last-64-token window, so it would push the model away from the
        # names and values it must copy from the prompt. Opt in with extra_body={"repetition_penalty": x}.
        return {"top_k": settings.top_k if settings.top_k > 0 else -1}  # vLLM spells "disabled" -1

    def context_window(self, model_entry: Mapping[str, Any], props: Mapping[str, Any] | None) -> int | None:
        window = model_entry.get("max_model_len")
        return window if isinstance(window, int) and window > 0 else None


_DIALECTS: dict[str, ServerDialect] = {d.kind: d() for d in (
    ServerDialect, AutoDialect, LlamaCppPythonDialect, LlamaServerDialect, VllmDialect)}


def dialect_for(kind: ServerKind) -> ServerDialect:
    """The dialect of a server kind (``"auto"``: not discovered yet)."""
    return _DIALECTS[kind]
