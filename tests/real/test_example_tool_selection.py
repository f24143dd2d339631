"""examples/tool_selection.py on the default model: among 1,000 tools, the default selector reaches the fitting
tool for a paraphrase, a Chinese question and a question of two parts, and a caller's function selector decides
what the model sees."""

from __future__ import annotations

import pytest
from shared_data import load_example

pytestmark = pytest.mark.real_model

EXAMPLE = load_example("tool_selection.py")


def test_the_example_offers_the_fitting_tools_among_a_thousand_and_obeys_a_callers_selector() -> None:
    replies = EXAMPLE.main([])
    meaning = replies["meaning"]
    offered = [set(r.response_metadata["offered_tools"]) for r in meaning]
    assert all(len(o) < 10 for o in offered)  # a few of 1,000
    assert "get_weather" in offered[0] and "get_weather" in offered[1]
    assert {"convert_currency", "send_email"} <= offered[2]
    assert [c["name"] for c in meaning[0].tool_calls] == ["get_weather"]
    assert [c["name"] for c in meaning[1].tool_calls] == ["get_weather"]
    assert meaning[1].tool_calls[0]["args"]["city"] in ("巴黎", "Paris")
    own = replies["own"]
    assert own[0].response_metadata["offered_tools"] == ["get_weather"]
    assert set(own[1].response_metadata["offered_tools"]) == {"convert_currency", "send_email"}
    assert [c["name"] for c in own[0].tool_calls] == ["get_weather"]
