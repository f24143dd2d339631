"""The playground as a new user meets it (issue 61), in headless Chromium on the embedded default model: the prompt
panel shows the prompt the engine ran (compared with what the backend was given), a failed send leaves the
conversation as it was, a stale call card cannot answer a later call, the stand-in is named, Stop ends the
generation on the server, Enter sends, copy as curl reproduces the call, and the page holds at 390 px and in the
dark. Screenshots go to docs/images/ when HAMMER_DOCS_SCREENSHOTS=1 (docs/playground.md shows them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
from playground_page import (  # noqa: F401 - the fixtures, shared with test_playground_browser_real.py
    KEY,
    TOKEN,
    ask,
    browser_fixture,
    engine_fixture,
    mcp_servers_fixture,
    page_fixture,
    prompts_run_fixture,
    screenshot,
    server_fixture,
)

from hammer_plugins.http_api import BackgroundServer

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(300)]

MCP_TOOLS = ("get_current_time", "convert_time", "get_banner")


def demo_only(page: Any) -> None:
    """The demo tools on, the MCP servers' off: the chats here are about the demo tools."""
    from playwright.sync_api import expect

    page.click("#add-demo")
    expect(page.locator(".tool")).to_have_count(6)
    for name in ("convert_time", "get_banner"):
        page.uncheck(f"input[data-tool={name}]")


def health(server: BackgroundServer) -> dict[str, Any]:
    return httpx.get(server.url + "/health", timeout=10).json()


def test_after_a_result_the_panel_shows_the_prompt_the_engine_ran(page: Any, prompts_run: list[str]) -> None:
    from playwright.sync_api import expect

    demo_only(page)
    ask(page, "What's the weather in Paris?")
    card = page.locator(".call")
    expect(card).to_have_count(1)
    assert page.text_content("#prompt") == prompts_run[-1] and "[BEGIN OF AVAILABLE TOOLS]" in prompts_run[-1]
    card.locator(".result").fill("It is 18 C and sunny in Paris.")
    card.locator(".send-result").click()
    expect(page.locator(".message.assistant")).to_have_count(2)
    expect(page.locator("#progress")).to_be_hidden(timeout=120_000)
    # The answer after the result came from a prompt without tools (max_tool_rounds=1): the panel shows that one,
    # not the tools prompt that planning the request again would show.
    ran = prompts_run[-1]
    assert "[BEGIN OF AVAILABLE TOOLS]" not in ran and "18 C and sunny" in ran
    assert page.text_content("#prompt") == ran
    assert "answer pass" in page.inner_text("#passes") and page.inner_text("#offered") == "none"
    assert f"{page.locator('#metrics dd').nth(2).inner_text()} prompt tokens" in page.inner_text("#passes")


def test_a_failed_send_then_a_good_one_gives_one_user_turn(page: Any, prompts_run: list[str]) -> None:
    """Temperature 5 is refused (400): the question comes back to the box and the chat holds no turn of it; the
    send after the fix (with Enter) gives the model the question once."""
    from playwright.sync_api import expect

    demo_only(page)
    question = "What's the weather in Oslo?"
    page.fill("#temperature", "5")
    page.fill("#question", question)
    page.press("#question", "Enter")  # Enter sends
    expect(page.locator("#chat-error")).to_contain_text("temperature")
    assert page.input_value("#question") == question and page.locator(".message").count() == 0
    page.fill("#temperature", "0")
    page.press("#question", "Shift+Enter")  # a new line, not a send
    assert "\n" in page.input_value("#question") and page.locator(".message").count() == 0
    page.fill("#question", question)
    page.press("#question", "Enter")
    expect(page.locator(".call")).to_have_count(1, timeout=120_000)
    assert prompts_run[-1].count(question) == 1 and page.locator(".message.user").count() == 1
    assert page.locator("#chat-error").is_hidden()


def test_a_stale_card_cannot_answer_a_later_call(page: Any, prompts_run: list[str]) -> None:
    from playwright.sync_api import expect

    demo_only(page)
    ask(page, "Calculate 17 * 23.")
    first = page.locator(".call").first
    expect(first.locator(".call-name")).to_have_text("calculate")
    page.fill("#question", "What is the current time?")
    page.press("#question", "Enter")
    expect(page.locator("#waiting")).to_contain_text("1 call waits for a result")  # sending asks first
    assert page.locator(".message.user").count() == 1
    page.click("#send-anyway")
    expect(page.locator(".call")).to_have_count(2, timeout=120_000)
    expect(page.locator("#progress")).to_be_hidden(timeout=120_000)
    # The first card is closed: no box to type its result in, no button to send it.
    assert first.locator(".result").is_hidden() and first.locator(".send-result").is_hidden()
    assert "a later question was sent" in first.locator(".closed-note").inner_text()
    second = page.locator(".call").nth(1)
    assert second.locator(".call-name").inner_text() == "get_current_time"
    second.locator(".result").fill("14:05")
    second.locator(".send-result").click()
    expect(page.locator(".message.assistant")).to_have_count(3)
    expect(page.locator("#progress")).to_be_hidden(timeout=120_000)
    assert "14:05" in prompts_run[-1] and "391" not in prompts_run[-1]


def test_the_stand_in_is_named_with_how_to_get_a_hammer_model(page: Any) -> None:
    from playwright.sync_api import expect

    expect(page.locator("#model")).to_contain_text("qwen2.5-coder-0.5b-instruct-q4.gguf")
    note = page.locator("#model-note")
    expect(note).to_be_visible()
    assert "not a Hammer model" in note.inner_text() and "hammer pull hammer2.1-1.5b" in note.inner_text()
    assert page.is_checked("#gate")  # the server's gate setting, offered as the page's


def test_stop_cancels_the_generation_on_the_server(page: Any, server: BackgroundServer) -> None:
    from playwright.sync_api import expect

    before = health(server)["cancelled"]
    page.select_option("#tool-choice", "none")
    page.fill("#max-tokens", "1500")
    page.fill("#question", "Write a very long story about a lighthouse keeper and the sea, in many chapters.")
    page.press("#question", "Enter")
    expect(page.locator("#elapsed")).to_contain_text(" s")  # the spinner counts the seconds
    deadline = time.monotonic() + 120
    while health(server)["running"] == 0:  # the generation has started on the server
        assert time.monotonic() < deadline, "the request never started"
        time.sleep(0.2)
    page.click("#stop")
    expect(page.locator("#chat-error")).to_contain_text("Stopped")
    deadline = time.monotonic() + 20
    while (now := health(server))["running"] != 0 or now["cancelled"] == before:  # the slot is free again
        assert time.monotonic() < deadline, f"the generation went on after Stop: {now}"
        time.sleep(0.2)
    assert page.locator(".message").count() == 0 and page.input_value("#question").startswith("Write a very long")


def test_an_answer_cut_at_max_tokens_says_so(page: Any) -> None:
    from playwright.sync_api import expect

    page.select_option("#tool-choice", "none")
    page.fill("#max-tokens", "4")
    ask(page, "Write a poem about the sea.")
    expect(page.locator(".message.assistant .cut")).to_contain_text("Cut at max tokens (4)")


def test_copy_as_curl_reproduces_the_call(page: Any, default_model_path: str) -> None:
    from playwright.sync_api import expect

    demo_only(page)
    ask(page, "What's the weather in Paris?")
    card = page.locator(".call")
    expect(card).to_have_count(1)
    card.locator(".copy-json").click()
    call = json.loads(card.locator(".snippet").inner_text())
    card.locator(".copy-python").click()
    python = card.locator(".snippet").inner_text()
    assert "ChatHammer(" in python and ".bind_tools(tools" in python and KEY not in python
    compile(python, "<copied>", "exec")
    card.locator(".copy-curl").click()
    curl = card.locator(".snippet").inner_text()
    assert KEY not in curl  # the key is read from the environment where it runs
    ran = subprocess.run(["bash", "-c", curl], capture_output=True, text=True, timeout=180,
                         env={**os.environ, "HAMMER_SERVER_API_KEY": KEY}, check=True)
    [again] = json.loads(ran.stdout)["choices"][0]["message"]["tool_calls"]
    assert again["function"]["name"] == call["name"] == "get_weather"
    assert json.loads(again["function"]["arguments"]) == call["arguments"]
    # The Python snippet runs the same request in process (ChatHammer, the same model): the same call.
    ran = subprocess.run([sys.executable, "-c", python], capture_output=True, text=True, timeout=240, check=True,
                         env={**os.environ, "HAMMER_MODEL_PATH": default_model_path})
    assert "'name': 'get_weather'" in ran.stdout and "'city': 'Paris'" in ran.stdout, ran.stdout


def test_many_tools_search_switch_all_and_remove(page: Any) -> None:
    from playwright.sync_api import expect

    tools = [{"name": f"lookup_{i:03d}", "description": f"Look up record {i}.",
              "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}} for i in range(200)]
    page.fill("#paste", json.dumps(tools))
    page.click("#add-pasted")
    expect(page.locator(".tool")).to_have_count(203)
    page.fill("#tool-search", "lookup_01")
    expect(page.locator(".tool")).to_have_count(10)
    page.click("#all-off")
    expect(page.locator("#budget")).to_contain_text("On: 193 of 203 tools")
    page.fill("#tool-search", "")
    page.click("#all-off")
    expect(page.locator("#budget")).to_contain_text("On: 0 of 203 tools")
    page.click("#all-on")
    page.click(".remove-tool[data-tool=lookup_000]")
    expect(page.locator("#budget")).to_contain_text("On: 202 of 202 tools")
    assert page.locator("input[data-tool=lookup_000]").count() == 0


def test_a_wrong_key_and_a_server_out_of_reach_are_said(browser: Any, server: BackgroundServer) -> None:
    from playwright.sync_api import expect

    context = browser.new_context()
    opened = context.new_page()
    opened.goto(server.url + "/#token=" + TOKEN)
    opened.fill("#key", "not-the-key")
    opened.press("#key", "Enter")
    expect(opened.locator("#tools-error")).to_contain_text("The server refused this API key")
    opened.fill("#key", KEY)
    opened.press("#key", "Enter")
    expect(opened.locator("#tools-error")).to_be_hidden()
    opened.route("**/playground/api/chat", lambda route: route.abort())  # as if the server were down
    opened.fill("#question", "What's the weather in Paris?")
    opened.press("#question", "Enter")
    expect(opened.locator("#chat-error")).to_contain_text("Could not reach the server")
    assert opened.input_value("#question") == "What's the weather in Paris?" and opened.locator(".message").count() == 0
    context.close()


def test_new_chat_clears_the_side_panel(page: Any) -> None:
    from playwright.sync_api import expect

    demo_only(page)
    ask(page, "What's the weather in Paris?")
    assert page.inner_text("#prompt")
    page.click("#clear")
    expect(page.locator(".message")).to_have_count(0)
    assert page.inner_text("#prompt") == "" and page.inner_text("#metrics") == "" and page.inner_text("#passes") == ""


@pytest.mark.parametrize("look", ["narrow", "dark"])
def test_the_page_holds_at_390_px_and_in_the_dark(browser: Any, server: BackgroundServer, look: str) -> None:
    from playwright.sync_api import expect

    options: dict[str, Any] = ({"viewport": {"width": 390, "height": 844}} if look == "narrow"
                               else {"viewport": {"width": 1280, "height": 900}, "color_scheme": "dark"})
    context = browser.new_context(**options)
    opened = context.new_page()
    opened.goto(server.url + "/#token=" + TOKEN)
    opened.fill("#key", KEY)
    opened.press("#key", "Enter")
    expect(opened.locator("#model-note")).to_be_visible()
    opened.click("#add-demo")
    for name in MCP_TOOLS[1:]:
        opened.uncheck(f"input[data-tool={name}]")
    ask(opened, "What's the weather in Paris?")
    expect(opened.locator(".call")).to_have_count(1)
    if look == "narrow":
        assert opened.evaluate("document.documentElement.scrollWidth") <= 390  # nothing wider than the screen
        assert opened.locator("#chat-panel").bounding_box()["width"] > 300  # the chat is not a sliver
    else:
        background = opened.evaluate("getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(21, 23, 26)", background
    screenshot(opened, look)
    context.close()
