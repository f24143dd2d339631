"""The playground page in a real browser: Debian's headless Chromium driven by Playwright's Python API, against
the server on the embedded default model (with the relevance gate on, so that a question no tool fits is
refused). What a person does: add tools, ask, see the call card, answer it with a result, see the prose; mask
names and see them masked in the prompt panel; tool choice none; a refusal; bad tools shown as the API's own
error with nothing typed lost; hostile text from tools and results rendered as text. The page runs under its
own Content-Security-Policy throughout (Playwright's own waits run; any script the page did not ship would
not). Screenshots go to docs/images/ when HAMMER_DOCS_SCREENSHOTS=1 (docs/playground.md shows them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playground_page import (  # noqa: F401 - the fixtures, shared with test_playground_page_real.py
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
from serve_process import hammer_serve

from hammer_plugins.http_api import BackgroundServer
from hammer_plugins.http_api.playground.approvals import TOKEN_HEADER

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(300)]


def test_a_call_card_then_the_result_then_the_prose(page: Any) -> None:
    from playwright.sync_api import expect

    page.click("#add-demo")
    expect(page.locator(".tool")).to_have_count(6)  # the MCP servers' three and the demo's four, one name shared
    for name in ("convert_time", "get_banner"):  # off: this chat is about the demo tools
        page.uncheck(f"input[data-tool={name}]")
    assert "≈" in page.inner_text("#budget") and "On: 4 of 6 tools" in page.inner_text("#budget")
    ask(page, "What's the weather in Paris?")
    card = page.locator(".call")
    expect(card).to_have_count(1)
    assert card.locator(".call-name").inner_text() == "get_weather"
    assert json.loads(card.locator(".call-args").inner_text())["city"] == "Paris"
    assert card.locator(".validity").inner_text() == "valid"
    assert "[BEGIN OF AVAILABLE TOOLS]" in page.inner_text("#prompt")
    assert "get_weather" in page.inner_text("#offered") and "prompt tokens" in page.inner_text("#metrics")
    card.locator(".result").fill("It is 18 C and sunny in Paris.")
    card.locator(".send-result").click()
    expect(page.locator(".message.assistant")).to_have_count(2)
    expect(page.locator("#send")).to_be_enabled(timeout=120_000)
    assert "18" in page.locator(".message.assistant .text").last.inner_text()
    screenshot(page, "call")


def test_masking_shows_the_masked_names_in_the_prompt(page: Any) -> None:
    from playwright.sync_api import expect

    page.click("#add-demo")
    page.check("#mask")
    ask(page, "What's the weather in Paris?")
    expect(page.locator(".call")).to_have_count(1)
    assert page.locator(".call-name").inner_text() == "get_weather"  # the user sees the real name...
    prompt = page.inner_text("#prompt")
    tools_block = prompt.split("[BEGIN OF AVAILABLE TOOLS]", 1)[1].split("[END OF AVAILABLE TOOLS]", 1)[0]
    assert "get_weather" not in tools_block  # ...the model read a masked one
    assert "get_weather → shown as " in page.inner_text("#offered")
    screenshot(page, "masking")


def test_tool_choice_none_answers_in_prose_and_offers_no_tools(page: Any) -> None:
    from playwright.sync_api import expect

    page.click("#add-demo")
    page.select_option("#tool-choice", "none")
    ask(page, "Say hello to Ada in five words.")
    expect(page.locator(".call")).to_have_count(0)
    assert page.locator(".message.assistant .text").last.inner_text().strip()
    assert page.inner_text("#offered") == "none" and "[BEGIN OF AVAILABLE TOOLS]" not in page.inner_text("#prompt")


def test_a_question_no_tool_fits_is_shown_as_a_refusal(page: Any) -> None:
    from playwright.sync_api import expect

    page.click("#add-demo")
    ask(page, "Tell me a joke about penguins.")
    refusal = page.locator(".message.refusal")
    expect(refusal).to_have_count(1)
    # The gate refused it (no tool shares a word with the question): said as the gate's, the model did not run.
    assert "relevance gate" in refusal.locator(".who").inner_text() and refusal.locator(".text").inner_text().strip()
    assert "the model did not run" in page.inner_text("#passes")
    expect(page.locator(".call")).to_have_count(0)
    screenshot(page, "refusal")


def test_bad_tools_show_the_apis_error_and_keep_what_was_typed(page: Any) -> None:
    from playwright.sync_api import expect

    page.fill("#paste", '[{"name": "lookup", ')
    page.click("#add-pasted")
    expect(page.locator("#tools-error")).to_contain_text("not JSON")
    assert page.input_value("#paste") == '[{"name": "lookup", '
    bad = json.dumps([{"name": "lookup", "parameters": {"type": "object", "properties": {
        "s": {"type": "string", "pattern": "(?=a)(a+)+b"}}}}])
    page.fill("#paste", bad)
    page.click("#add-pasted")
    expect(page.locator("#tools-error")).to_contain_text("Invalid tool schema")
    assert page.input_value("#paste") == bad and page.locator(".tool").count() == 3  # the MCP servers' tools only


def test_hostile_text_from_tools_and_results_renders_as_text(page: Any) -> None:
    from playwright.sync_api import expect

    hostile = '<img src=x onerror="document.title=\'pwned\'"><script>document.title="pwned"</script>'
    tool = {"name": "get_weather", "description": "Weather in a city. " + hostile,
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    page.fill("#paste", json.dumps(tool))
    page.click("#add-pasted")
    expect(page.locator(".tool .description").filter(has_text="Weather in a city.")).to_contain_text("<img src=x")
    ask(page, "What's the weather in Paris?")
    card = page.locator(".call")
    expect(card).to_have_count(1)
    card.locator(".result").fill(hostile)
    card.locator(".send-result").click()
    expect(page.locator(".result-sent")).to_contain_text("<script>")
    expect(page.locator("#send")).to_be_enabled(timeout=120_000)
    assert page.title() == "Hammer playground"
    assert page.locator("img").count() == 0 and page.locator("main script").count() == 0


def test_hammer_playground_serves_the_page_with_the_tools_file(tmp_path: Path, default_model_path: str) -> None:
    """`hammer playground --tools FILE --mcp ...`, as the README starts it: the page at /, the file's tools in it, and an
    MCP server that did not start named in the page with the reason."""
    import httpx

    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": "lookup_order", "description": "Find an order by its number.",
                                  "parameters": {"type": "object", "properties": {"number": {"type": "string"}}}}]))
    args = ["--tools", str(tools), "--mcp", "no-such-mcp-server-here"]  # a server that cannot start: said in the page
    with hammer_serve(args, {"HAMMER_MODEL_PATH": default_model_path}, command="playground") as run:
        root = run.base_url.removesuffix("/v1")
        assert "Hammer playground" in httpx.get(root + "/").text
        assert httpx.get(root + "/playground/api/config").status_code == 403  # the token is the terminal's
        import re

        assert run.process.stdout is not None
        printed = ""  # the terminal's lines so far: the address is printed before /health answers
        while "#token=" not in printed:
            printed += run.process.stdout.readline()
        [token] = re.findall(r"/#token=([\w-]+)", printed)
        config = httpx.get(root + "/playground/api/config", headers={TOKEN_HEADER: token}).json()
        assert [t["function"]["name"] for t in config["tools"]] == ["lookup_order"]
        [error] = config["errors"]
        assert "'no-such-mcp-server-here' did not start" in error and "Fix:" in error
    assert run.code == 0 and f"The playground, in a browser: {root}/#token={token}" in printed


def panel_passes(page: Any) -> list[tuple[str, str]]:
    """The prompt panel's passes, each as its button reads and the prompt it shows when clicked."""
    shown = []
    for index in range(page.locator("#passes .pass").count()):
        button = page.locator("#passes .pass-button").nth(index)
        button.click()
        shown.append((button.inner_text(), page.text_content("#prompt")))
    return shown


def test_slot_filling_mode_over_three_turns(page: Any, prompts_run: list[str]) -> None:
    """Three turns fill the call, each snapshot shown; the prompt panel shows each snapshot call the server's backend
    read, pass by pass, and a question the relevance gate refuses as a prompt the model did not run."""
    from playwright.sync_api import expect

    tool = {"name": "pay_fine", "description": "Pay a traffic fine.", "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city where the fine was issued."},
        "plate": {"type": "string", "description": "The car's license plate number."}}, "required": ["city", "plate"]}}
    page.fill("#paste", json.dumps(tool))
    page.click("#add-pasted")
    # The first tool check of a fresh server pays one-time costs (the grammar's tokenizer): run alone, this test
    # meets them here.
    expect(page.locator(".tool")).to_have_count(4, timeout=60_000)
    for name in ("get_current_time", "convert_time", "get_banner"):  # the MCP servers' tools: off here
        page.uncheck(f"input[data-tool={name}]")
    page.check("#slot-mode")
    for said in ("I want to pay a traffic fine.", "It was in Guangzhou.", "The plate is D456."):
        before = len(prompts_run)
        ask(page, said)
        # The panel's passes are the prompts the backend read for this turn, in order (a focused snapshot call
        # that answers [] is asked again with every tool: two passes), never a prompt planned again.
        ran = prompts_run[before:]
        assert [prompt for _, prompt in panel_passes(page)] == ran and ran and said in ran[-1]
    cards = page.locator(".snapshot")
    assert page.locator("#chat-error").is_hidden(), page.inner_text("#chat-error")
    expect(cards).to_have_count(3)
    heads = [cards.nth(i).locator(".snapshot-head").inner_text() for i in range(3)]
    assert heads[0].endswith("(collecting)") and heads[2] == "Snapshot, turn 3: pay_fine (ready)"
    assert "missing (required)" in cards.nth(0).inner_text()  # nothing said yet: asked, not invented
    assert "Guangzhou" in cards.nth(1).inner_text() and "plate\t\tmissing (required)" in cards.nth(1).inner_text()
    assert json.loads(page.locator(".call-args").last.inner_text()) == {"city": "Guangzhou", "plate": "D456"}
    assert "The plate is D456." in page.inner_text("#prompt") and page.inner_text("#offered") == "pay_fine"
    assert "collecting" in page.inner_text("#metrics") or "ready" in page.inner_text("#metrics")
    screenshot(page, "slot-filling")
    before = len(prompts_run)
    ask(page, "Tell me a joke about penguins.")  # no word shared with pay_fine: the gate refuses, nothing runs
    assert prompts_run[before:] == []
    [(label, prompt)] = panel_passes(page)
    assert "the model did not run" in label and "Tell me a joke about penguins." in prompt
    assert "relevance gate refused" in page.inner_text("#pass-note")


def test_an_mcp_tool_runs_once_approved_and_its_output_is_text(page: Any) -> None:
    from playwright.sync_api import expect

    page.uncheck("input[data-tool=get_banner]")
    page.uncheck("input[data-tool=convert_time]")
    ask(page, "What time is it now in Tokyo?")
    card = page.locator(".call")
    expect(card).to_have_count(1)
    assert card.locator(".call-name").inner_text() == "get_current_time"
    assert "with these arguments?" in card.locator(".approval").inner_text()
    card.locator(".approve").click()
    expect(page.locator(".result-sent")).to_contain_text("Asia/Tokyo")  # the real server's answer
    expect(page.locator(".message.assistant")).to_have_count(2)
    expect(page.locator("#send")).to_be_enabled(timeout=120_000)
    screenshot(page, "mcp")
    # The hostile server: its description and its output are shown as text, nothing of them runs.
    page.click("#clear")
    page.check("input[data-tool=get_banner]")
    page.uncheck("input[data-tool=get_current_time]")
    page.select_option("#tool-choice", "get_banner")
    ask(page, "The banner for shoes, please.")
    expect(page.locator(".tool .description").filter(has_text="<img src=x")).to_have_count(1)
    page.locator(".call .approve").click()
    expect(page.locator(".result-sent")).to_contain_text("<script>document.title=3</script> Big sale")
    expect(page.locator("#send")).to_be_enabled(timeout=120_000)
    assert page.title() == "Hammer playground" and page.locator("img").count() == 0


def test_a_page_opened_without_its_token_asks_for_it(browser: Any, server: BackgroundServer) -> None:
    """The plain address (no token): the page asks for the token, and works once it is typed in."""
    from playwright.sync_api import expect

    context = browser.new_context()
    opened = context.new_page()
    opened.goto(server.url + "/")
    opened.fill("#key", KEY)
    opened.press("#key", "Enter")
    expect(opened.locator("#token-box")).to_be_visible()
    expect(opened.locator("#tools-error")).to_contain_text("token")
    opened.fill("#token", TOKEN)
    opened.press("#token", "Enter")
    expect(opened.locator("#model")).to_contain_text("(served as hammer)")
    expect(opened.locator("#tools-error")).to_be_hidden()
    context.close()
