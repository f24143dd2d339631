"""The Hammer chat template (hammer_plugins/prompt/templates/hammer.jinja) renders exactly what
hammer_plugins.prompt.render renders, through transformers' own apply_chat_template (no model: a
tokenizer is only needed to call it). Through vLLM's rendering: test_vllm_template.py."""

from __future__ import annotations

from typing import Any

import pytest
from template_cases import TEMPLATE, bfcl_cases, conversation_case, conversation_cases


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    # apply_chat_template with tokenize=False only renders: any tokenizer will do.
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"x": 0}, unk_token="x")))


def render(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, **kwargs: Any) -> str:
    return tokenizer.apply_chat_template(messages, tools=tools, chat_template=TEMPLATE.read_text(),
                                         tokenize=False, add_generation_prompt=True, **kwargs)


def test_every_bfcl_prompt_renders_byte_identical(tokenizer: Any) -> None:
    differing: list[str] = []
    count = 0
    for case_id, messages, tools, expected in bfcl_cases():
        count += 1
        if render(tokenizer, messages, tools) != expected:
            differing.append(case_id)
    assert count > 3000, f"only {count} BFCL prompts were found"
    assert differing == [], f"{len(differing)} of {count} differ, e.g. {differing[:5]}"


@pytest.mark.parametrize("case", conversation_cases(), ids=lambda c: c[0])
def test_conversations_with_calls_and_results(tokenizer: Any, case: tuple[Any, ...]) -> None:
    _, messages, tools, kwargs, expected = case
    assert render(tokenizer, messages, tools, **kwargs) == expected


def test_an_unknown_after_tools_mode_is_refused_by_name(tokenizer: Any) -> None:
    _, messages, tools, _, _ = conversation_case("with tools, 5 messages")
    from jinja2 import TemplateError

    with pytest.raises(TemplateError, match='hammer_after_tools must be "answer" or "call", not "maybe"'):
        render(tokenizer, messages, tools, hammer_after_tools="maybe")
