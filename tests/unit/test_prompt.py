"""The rendered prompt matches Hammer's trained layout exactly."""

from __future__ import annotations

import json

from hammer_plugins import Message, Tool, ToolCall
from hammer_plugins.prompt.render import (
    FORMAT_INSTRUCTION,
    TASK_INSTRUCTION_V21,
    render_chat,
    render_prefix,
    render_prompt,
)
from hammer_plugins.prompt.tools_block import hammer_entry

TOOL = Tool(name="get_weather", description="Weather",
            parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})


def test_hammer21_single_turn_is_byte_exact() -> None:
    tools_json = json.dumps([hammer_entry(TOOL)])
    expected = (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\n"
        f"[BEGIN OF TASK INSTRUCTION]\n{TASK_INSTRUCTION_V21}\n[END OF TASK INSTRUCTION]\n\n"
        f"[BEGIN OF AVAILABLE TOOLS]\n{tools_json}\n[END OF AVAILABLE TOOLS]\n\n"
        f"[BEGIN OF FORMAT INSTRUCTION]\n{FORMAT_INSTRUCTION}\n[END OF FORMAT INSTRUCTION]\n\n<|im_end|>\n"
        "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert render_prompt([Message.user("Weather in Paris?")], [TOOL]) == expected
    assert "AVAILABLE_TOOLS" not in expected  # the checkpoint template's misspelling is not used


def test_multi_turn_with_calls_results_errors_and_system() -> None:
    call = ToolCall(name="get_weather", arguments={"city": "Paris"})
    messages = [
        Message.system("Be brief."),
        Message.user("Weather in Paris?"),
        Message.assistant(tool_calls=[call]),
        Message.tool('{"temp": 21}', tool_call_id=call.id),
        Message.tool("city not found", tool_call_id=call.id, is_error=True),
        Message.assistant("It is 21 degrees."),
        Message.user("Thanks — und Berlin? 🌧"),
    ]
    text = render_prompt(messages, [TOOL])
    body = text[len(render_prefix([TOOL])):]
    assert body == (
        "<|im_start|>user\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
        '<|im_start|>assistant\n```\n[{"name": "get_weather", "arguments": {"city": "Paris"}}]\n```<|im_end|>\n'
        '<|im_start|>tool\n{"temp": 21}<|im_end|>\n'
        "<|im_start|>tool\nError: city not found<|im_end|>\n"
        "<|im_start|>assistant\nIt is 21 degrees.<|im_end|>\n"
        "<|im_start|>user\nThanks — und Berlin? 🌧<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_prefix_is_shared_across_turns() -> None:
    one = render_prompt([Message.user("a")], [TOOL])
    two = render_prompt([Message.user("a"), Message.assistant("b"), Message.user("c")], [TOOL])
    prefix = render_prefix([TOOL])
    assert one.startswith(prefix) and two.startswith(prefix)


def test_hammer20_layout_puts_the_query_in_its_block() -> None:
    text = render_prompt([Message.user("Weather in Paris?")], [TOOL], prompt_format="hammer2.0")
    assert "[BEGIN OF QUERY]\nWeather in Paris?\n[END OF QUERY]\n\n<|im_end|>\n<|im_start|>assistant\n" in text
    assert "2. tool: Returns" not in text  # the role lines arrived with 2.1
    assert text.count("<|im_start|>user") == 1
    multi = render_prompt([Message.user("hi"), Message.assistant("yo"), Message.user("go")], [TOOL], "hammer1.0")
    assert "[BEGIN OF QUERY]\nuser: hi\nassistant: yo\nuser: go\n[END OF QUERY]" in multi


def test_without_tools_it_is_a_plain_chat() -> None:
    text = render_prompt([Message.system("Be nice."), Message.user("hi")], [])
    assert text == render_chat([Message.system("Be nice."), Message.user("hi")])
    assert text == "<|im_start|>system\nBe nice.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert "[BEGIN OF" not in text


def test_plain_chat_tells_calls_and_results_in_words() -> None:
    call = ToolCall(name="calculate", arguments={"expression": "17 * 23"})
    other = ToolCall(name="other", arguments={})
    text = render_chat([Message.user("What is 17 * 23?"), Message.assistant(tool_calls=[call, other]),
                        Message.tool("391", tool_call_id=call.id),
                        Message.tool("boom", tool_call_id=other.id, is_error=True)])
    assert text.endswith(
        '<|im_start|>assistant\nI called calculate({"expression": "17 * 23"}), which returned:<|im_end|>\n'
        "<|im_start|>tool\n391<|im_end|>\n"
        "<|im_start|>assistant\nI called other({}), which failed with:<|im_end|>\n"
        "<|im_start|>tool\nboom<|im_end|>\n"
        '<|im_start|>user\nNow answer my question "What is 17 * 23?" in plain language.<|im_end|>\n'
        "<|im_start|>assistant\n"
    )
    assert "```" not in text


def test_plain_chat_result_without_its_call_gets_the_name_from_the_id() -> None:
    text = render_chat([Message.user("hi"), Message.tool("42", tool_call_id="zz", name="answer")])
    assert ('<|im_start|>tool\nThe tool answer returned: 42<|im_end|>\n'
            '<|im_start|>user\nNow answer my question "hi" in plain language.<|im_end|>') in text
