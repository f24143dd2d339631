"""What the page's chat adds to Chat Completions: the record of what the model read, the relevance gate as a page
setting, and the model named honestly.

- :func:`read_page_chat`: ``/v1/chat/completions``'s body, read as that route reads it, with two of the page's
  own: the answer carries what the model read pass by pass (``record_passes``: the prompt panel shows the prompt
  that ran, never one planned again), and ``relevance_gate`` (true or false; left out: the server's setting).
- :func:`model_card`: the model's file or preset, and for the embedded stand-in what it is and how to get a
  Hammer model.

Example:
    >>> chat, call = read_page_chat({"model": "hammer", "messages": [{"role": "user", "content": "hi"}],
    ...                              "relevance_gate": False}, ["hammer"])
    >>> call.record_passes, call.relevance_gate
    (True, False)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hammer_plugins.engine.request import EngineRequest
from hammer_plugins.http_api.chat_completions.request import ChatRequest, read_chat
from hammer_plugins.http_api.errors import APIError
from hammer_plugins.models.default import DEFAULT_MODEL_FILE

PULL_COMMAND = "hammer pull hammer2.1-1.5b"
"""How to get a real Hammer model (then start the playground again: a pulled model is picked over the stand-in)."""


def read_page_chat(body: Any, served: list[str]) -> tuple[ChatRequest, EngineRequest]:
    """The page's chat body: Chat Completions' (the same 400s), recorded pass by pass, the gate as the page set it."""
    gate = page_gate(body)
    chat, call = read_chat(body, served)
    return chat, call.model_copy(update={"record_passes": True, "relevance_gate": gate})


def page_gate(body: Any) -> bool | None:
    """The relevance gate as a page's body sets it (its chat and its slot-filling turns): true, false, or None
    (left out: the server's setting); anything else is a 400 naming ``relevance_gate``."""
    gate = body.get("relevance_gate") if isinstance(body, dict) else None
    if gate is not None and not isinstance(gate, bool):
        raise APIError(400, "relevance_gate must be true or false, or left out for the server's setting.",
                       param="relevance_gate", code="invalid_value")
    return gate


def model_card(engine: Any) -> dict[str, Any]:
    """The model as the page's header names it: ``file`` (the model file, preset or repo), ``stand_in`` (the
    embedded Qwen2.5-Coder-0.5B-Instruct, not a Hammer model) and ``note`` (for the stand-in: what it is and how
    to get a Hammer model)."""
    backend = engine.backend
    source = getattr(backend, "source", None)  # llama.cpp's resolved model; other backends name theirs
    name = backend.model_name
    stand_in = source is not None and (source.is_default or Path(source.location).name == DEFAULT_MODEL_FILE)
    if source is not None:
        name = source.short_name if not source.is_default else DEFAULT_MODEL_FILE
    note = ("the embedded stand-in, Qwen2.5-Coder-0.5B-Instruct: the base model of Hammer 2.1, not a Hammer model. "
            "It calls a tool for many questions Hammer would refuse. For a Hammer model: " + PULL_COMMAND +
            ", then start the playground again.") if stand_in else ""
    return {"file": name, "stand_in": stand_in, "note": note, "relevance_gate": engine.relevance_gate}
