"""Fixtures of the LlamaIndex adapter tests: one HammerLLM on the real default model per session."""

from __future__ import annotations

import pytest
from llama_index.llms.hammer import HammerLLM


@pytest.fixture(scope="session")
def hammer_llm(default_model_path: str) -> HammerLLM:
    """The embedded default model on llama.cpp, greedy, small answers, loaded once.

    Same backend settings as the shared ``llama_engine`` fixture, so both reuse one loaded model.
    ``parallel_tool_calls=False`` as the docs advise for this stand-in: allowed several calls, it adds
    an unasked one to most single questions (measured: 3 of 4 weather questions).
    """
    return HammerLLM(model_path=default_model_path, n_ctx=4096, max_tokens=96, parallel_tool_calls=False).load()
