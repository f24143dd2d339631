"""The playground's routes on a scripted engine (no model, no browser): the page and its files without the key,
under a strict Content-Security-Policy; its helpers behind the key and the page's token, checking tools as the
APIs do (the same 400) and showing a request as the model would read it. Running a tool (approvals, the token,
other origins): test_playground_approval.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.http_api import BackgroundServer, create_app
from hammer_plugins.http_api.playground.approvals import TOKEN_HEADER

KEY = "page-key"
TOKEN = "page-token"
AUTH = {"authorization": f"Bearer {KEY}", TOKEN_HEADER: TOKEN}
GIVEN = [{"type": "function", "function": {"name": "lookup_order", "description": "Find an order by its number.",
                                           "parameters": {"type": "object", "properties": {"number": {"type": "string"}},
                                                          "required": ["number"]}}}]


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    app = create_app(HammerEngine(backend=ScriptedBackend([])), model_name="hammer", api_key=KEY,
                     playground_tools=GIVEN, playground_token=TOKEN)
    with BackgroundServer(app) as running:
        yield running


def test_the_page_and_its_files_need_no_key_and_carry_a_strict_policy(server: BackgroundServer) -> None:
    for path, kind in (("/", "text/html"), ("/playground/static/playground.js", "text/javascript"),
                       ("/playground/static/playground.css", "text/css")):
        reply = httpx.get(server.url + path)
        assert reply.status_code == 200 and reply.headers["content-type"].startswith(kind), path
        policy = reply.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "default-src 'none'" in policy and "unsafe" not in policy
        assert reply.headers["x-content-type-options"] == "nosniff"
    page = httpx.get(server.url + "/").text
    assert "<script>" not in page and " style=" not in page and "http" not in page  # nothing inline, nothing fetched
    assert httpx.get(server.url + "/playground/static/%2e%2e%2fapp.py").status_code == 404  # only the page's own files
    assert httpx.get(server.url + "/playground/static/index.htm").status_code == 404


def test_the_helpers_need_the_key_and_the_token(server: BackgroundServer) -> None:
    assert httpx.get(server.url + "/playground/api/config").status_code == 401
    key_only = httpx.get(server.url + "/playground/api/config", headers={"authorization": f"Bearer {KEY}"})
    assert key_only.status_code == 403 and key_only.json()["error"]["code"] == "playground_token_required"
    assert TOKEN not in httpx.get(server.url + "/").text  # the page anyone may fetch does not hold it
    config = httpx.get(server.url + "/playground/api/config", headers=AUTH).json()
    assert config["model"] == "hammer" and config["tools"] == GIVEN
    assert {t["function"]["name"] for t in config["demo_tools"]} >= {"get_weather", "send_email"}
    assert httpx.post(server.url + "/playground/api/tools", json={"tools": GIVEN}).status_code == 401


def test_tools_are_checked_as_the_apis_check_them_and_costed(server: BackgroundServer) -> None:
    checked = httpx.post(server.url + "/playground/api/tools", json={"tools": GIVEN}, headers=AUTH).json()
    assert [t["name"] for t in checked["tools"]] == ["lookup_order"] and checked["tools"][0]["cost"] > 10
    assert checked["context_window"] == 32768
    bad = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "s": {"type": "string", "pattern": "(?=a)(a+)+b"}}}}}]
    for body in ({"tools": bad}, {"tools": "x"}, {"tools": [{"type": "function", "function": {"name": 5}}]}):
        reply = httpx.post(server.url + "/playground/api/tools", json=body, headers=AUTH)
        api = httpx.post(server.base_url + "/chat/completions", headers=AUTH, json={
            "model": "hammer", "messages": [{"role": "user", "content": "q"}], "tools": body["tools"]})
        assert reply.status_code == 400 and set(reply.json()["error"]) == {"message", "type", "param", "code"}
        if isinstance(body["tools"], list):  # the API's own words for the same tools
            assert reply.json()["error"]["message"] == api.json()["error"]["message"]


def test_inspect_shows_the_prompt_the_offered_tools_and_the_masked_names(server: BackgroundServer) -> None:
    body = {"model": "hammer", "messages": [{"role": "user", "content": "Where is order 42?"}], "tools": GIVEN,
            "mask_names": True}
    view = httpx.post(server.url + "/playground/api/inspect", json=body, headers=AUTH).json()
    shown = view["shown_names"]["lookup_order"]
    assert shown != "lookup_order" and shown in view["prompt"] and "lookup_order" not in view["prompt"]
    assert view["offered_tools"] == ["lookup_order"] and "Where is order 42?" in view["prompt"]
    plain = httpx.post(server.url + "/playground/api/inspect", json={**body, "mask_names": False,
                                                                       "tool_choice": "none"}, headers=AUTH).json()
    assert plain["offered_tools"] == [] and "[BEGIN OF AVAILABLE TOOLS]" not in plain["prompt"]


@pytest.mark.parametrize(("text", "said"), [('[{"name": "lookup", ', "is not JSON"), ('[{"description": "x"}]', "not a tool"),
                                            ('[{"name": "f", "parameters": {"type": "object", "properties": {"s": {'
                                             '"type": "string", "pattern": "(?=a)(a+)+b"}}}}]', "cannot be used")])
def test_a_bad_tools_file_is_a_clear_error_naming_it(tmp_path: Any, text: str, said: str) -> None:
    from hammer_plugins.cli.serve import playground_tools

    path = tmp_path / "tools.json"
    path.write_text(text)
    with pytest.raises(SystemExit) as failed:
        playground_tools(str(path))
    assert said in str(failed.value) and str(path) in str(failed.value)
    with pytest.raises(SystemExit, match="cannot read"):
        playground_tools(str(tmp_path / "missing.json"))


def test_slot_filling_turns_carry_their_snapshots_through_the_history() -> None:
    tool = {"type": "function", "function": {"name": "pay_fine", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "plate": {"type": "string"}}, "required": ["city", "plate"]}}}
    answers = ['[{"name": "pay_fine", "arguments": {"city": "Guangzhou"}}]',
               '[{"name": "pay_fine", "arguments": {"city": "Guangzhou", "plate": "D456"}}]']
    backend = ScriptedBackend(answers)
    app = create_app(HammerEngine(backend=backend), model_name="hammer", api_key=KEY, playground_token=TOKEN)
    with BackgroundServer(app) as server:
        history: list[Any] = [{"role": "user", "content": "Pay my fine in Guangzhou"}]
        first = httpx.post(server.url + "/playground/api/slot_filling", headers=AUTH,
                           json={"history": history, "tools": [tool]}).json()
        assert (first["action"], first["snapshot"]["missing_required"]) == ("ask", ["plate"])
        assert first["message"]["metadata"]["hammer_snapshot"]["state"] == "collecting"
        [done] = first["passes"]  # the snapshot call as it ran: the prompt the backend read
        assert done["prompt"] == backend.prompts[-1] and done["offered_tools"] == ["pay_fine"] and done["model_ran"]
        assert "Pay my fine in Guangzhou" in done["prompt"]
        history += [first["message"], {"role": "user", "content": "The plate is D456"}]
        second = httpx.post(server.url + "/playground/api/slot_filling", headers=AUTH,
                            json={"history": history, "tools": [tool]}).json()
        assert second["action"] == "execute" and second["calls"][0]["arguments"] == {"city": "Guangzhou", "plate": "D456"}
        assert second["snapshot"]["added"] == ["plate"]  # against the snapshot the history carried back
        for body in ({"history": [], "tools": [tool]}, {"history": [{"role": 5}], "tools": [tool]},
                     {"history": history, "tools": []}, {"history": history, "tools": [tool], "grounding": "x"},
                     {"history": history, "tools": [tool], "relevance_gate": "yes"}):
            reply = httpx.post(server.url + "/playground/api/slot_filling", headers=AUTH, json=body)
            assert reply.status_code == 400 and reply.json()["error"]["param"] in (
                "history", "tools", "grounding", "relevance_gate")
        no_question = httpx.post(server.url + "/playground/api/slot_filling", headers=AUTH,
                                 json={"history": [{"role": "assistant", "content": "Hi"}], "tools": [tool]})
        assert no_question.status_code == 400 and "no user message" in no_question.json()["error"]["message"]


def test_a_slot_filling_turn_shows_the_gate_as_the_page_set_it() -> None:
    """The page's gate setting holds in slot-filling mode: on, a question no tool shares a word with is refused
    without running the model, and the record says so; off, the model runs."""
    tool = {"type": "function", "function": {"name": "pay_fine", "description": "Pay a traffic fine.",
                                             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    backend = ScriptedBackend(["[]"])
    app = create_app(HammerEngine(backend=backend), model_name="hammer", api_key=KEY, playground_token=TOKEN)
    with BackgroundServer(app) as server:
        body: dict[str, Any] = {"history": [{"role": "user", "content": "Tell me a joke about penguins."}],
                                "tools": [tool], "relevance_gate": True}
        gated = httpx.post(server.url + "/playground/api/slot_filling", headers=AUTH, json=body).json()
        assert [(p["model_ran"], p["gated"]) for p in gated["passes"]] == [(False, True)] and backend.prompts == []
        ran = httpx.post(server.url + "/playground/api/slot_filling", headers=AUTH,
                         json={**body, "relevance_gate": False}).json()
        assert [p["prompt"] for p in ran["passes"]] == backend.prompts and ran["action"] == "none"


def test_only_the_given_runners_run_and_a_failing_tool_is_its_own_error() -> None:
    from hammer_plugins.mcp.client import MCPToolError

    def clock(timezone: str) -> str:
        return f"12:00 in {timezone}"

    def broken() -> str:
        raise MCPToolError("the server said no")

    calls = ['[{"name": "clock", "arguments": {"timezone": "UTC"}}, {"name": "broken", "arguments": {}}, '
             '{"name": "get_weather", "arguments": {"city": "Paris"}}]']
    tools = [{"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}}}
             for name in ("clock", "broken", "get_weather")]
    app = create_app(HammerEngine(backend=ScriptedBackend(calls)), model_name="hammer", api_key=KEY,
                     playground_runners={"clock": clock, "broken": broken}, playground_token=TOKEN)
    with BackgroundServer(app) as server:
        run = server.url + "/playground/api/run"
        assert httpx.get(server.url + "/playground/api/config", headers=AUTH).json()["runnable"] == ["broken", "clock"]
        answer = httpx.post(server.url + "/playground/api/chat", headers=AUTH, json={
            "model": "hammer", "messages": [{"role": "user", "content": "q"}], "tools": tools}).json()
        offers = {offer["name"]: offer for offer in answer["hammer_approvals"]}
        assert sorted(offers) == ["broken", "clock"]  # get_weather is no runner: nothing to approve
        approve = {name: {"call_id": o["call_id"], "approval": o["approval"]} for name, o in offers.items()}
        assert httpx.post(run, json=approve["clock"]).status_code == 401
        ran = httpx.post(run, headers=AUTH, json=approve["clock"])
        assert ran.json() == {"result": "12:00 in UTC"}
        failed = httpx.post(run, headers=AUTH, json=approve["broken"])
        assert failed.status_code == 502 and "the server said no" in failed.json()["error"]["message"]
        assert httpx.post(run, headers=AUTH, json={**approve["clock"], "arguments": [1]}).status_code == 400


def test_the_chat_answer_carries_what_the_model_read_and_the_gate_is_the_pages() -> None:
    """After a result the answer comes from a tool-free prompt: the page's chat says so (``hammer_passes``), where
    /inspect, planning the request again, shows the tools prompt. The page may set the relevance gate."""
    backend = ScriptedBackend(["It is 18 C in Paris.", "[]"])
    app = create_app(HammerEngine(backend=backend, relevance_gate=True), model_name="hammer", api_key=KEY,
                     playground_token=TOKEN)
    call = {"id": "c1", "type": "function", "function": {"name": "lookup_order", "arguments": '{"number": "7"}'}}
    body: dict[str, Any] = {"model": "hammer", "tools": GIVEN, "messages": [
        {"role": "user", "content": "Where is order 7?"}, {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "shipped"}]}
    joke = {"model": "hammer", "tools": GIVEN, "messages": [{"role": "user", "content": "Tell me a joke."}]}
    with BackgroundServer(app) as running:
        answer = httpx.post(running.url + "/playground/api/chat", json=body, headers=AUTH).json()
        [done] = answer["hammer_passes"]
        assert done["stage"] == "answer" and done["offered_tools"] == [] and done["prompt"] == backend.prompts[-1]
        planned = httpx.post(running.url + "/playground/api/inspect", json=body, headers=AUTH).json()
        assert planned["prompt"] != done["prompt"]  # why the panel shows the record, not a plan made again
        gated = httpx.post(running.url + "/playground/api/chat", json=joke, headers=AUTH).json()
        assert [(p["model_ran"], p["gated"]) for p in gated["hammer_passes"]] == [(False, True)]
        ungated = httpx.post(running.url + "/playground/api/chat", json={**joke, "relevance_gate": False},
                             headers=AUTH).json()
        assert ungated["hammer_passes"][0]["model_ran"] and len(backend.prompts) == 2
        bad = httpx.post(running.url + "/playground/api/chat", json={**joke, "relevance_gate": "no"}, headers=AUTH)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "relevance_gate"
        config = httpx.get(running.url + "/playground/api/config", headers=AUTH).json()
        assert config["model_card"]["relevance_gate"] is True and config["model_card"]["stand_in"] is False
        assert httpx.get(running.url + "/playground/static/snippets.js").status_code == 200
