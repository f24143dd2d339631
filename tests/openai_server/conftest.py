"""Fixtures the Responses and Messages test modules share: the openai and anthropic SDK clients of the
module's own ``server`` fixture (a :class:`BackgroundServer` serving with the module's ``KEY``)."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest


@pytest.fixture(scope="module")
def oai(server: Any, request: pytest.FixtureRequest) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=request.module.KEY, max_retries=0)


@pytest.fixture(scope="module")
def claude(server: Any, request: pytest.FixtureRequest) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key=request.module.KEY, max_retries=0)
