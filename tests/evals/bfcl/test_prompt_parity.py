"""Our prompt equals the reference prompt, byte for byte, on every BFCL single-turn entry.

The oracle is bfcl-eval's own ``HammerHandler._format_prompt`` (the code behind Hammer's published
BFCL scores), run on the same functions and messages BFCL's pipeline gives it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hammer_evals.bfcl.bfcl import load_category
from hammer_plugins import HammerEngine
from hammer_plugins.backends.scripted import ScriptedBackend

SINGLE_TURN = ("simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
               "irrelevance", "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
               "live_irrelevance", "live_relevance")


@pytest.fixture(scope="module")
def reference() -> Any:
    from hammer_evals.bfcl.bfcl import load_checker

    load_checker()  # installs the offline stand-in for bfcl-eval's vendor-SDK model table
    from bfcl_eval.model_handler.local_inference.hammer import HammerHandler
    from bfcl_eval.model_handler.utils import convert_system_prompt_into_user_prompt

    def render(messages: list[dict[str, Any]], functions: list[dict[str, Any]]) -> str:
        # What the handler's pipeline does: system turns become user turns, then _format_prompt.
        messages = convert_system_prompt_into_user_prompt(copy.deepcopy(messages))
        return HammerHandler._format_prompt(None, messages, copy.deepcopy(functions))

    return render


@pytest.mark.parametrize("category", SINGLE_TURN)
def test_every_entry_renders_exactly_as_the_reference(category: str, reference: Any) -> None:
    entries, _ = load_category(category)
    engine = HammerEngine(backend=ScriptedBackend([]), tool_budget=0)  # BFCL's prompt offers every function
    differing: list[str] = []
    for entry in entries:
        if not entry.functions:
            continue
        ours = engine.render(copy.deepcopy(entry.question), tools=copy.deepcopy(entry.functions))
        if ours != reference(entry.question, entry.functions):
            differing.append(entry.id)
    assert differing == [], f"{len(differing)} of {len(entries)} differ, e.g. {differing[:5]}"
