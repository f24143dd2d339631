"""MCP tools from real stdio servers bind to ChatHammer, HammerLLM and the engine as they come.

``schema_server.py`` (FastMCP, written here) sends ``$defs``/``$ref`` (a pydantic model argument),
``anyOf`` with ``null`` (``Optional``), defaults and ``additionalProperties`` (a dict argument). Each
route (langchain-mcp-adapters, llama-index-tools-mcp, :class:`hammer_plugins.mcp.client.MCPServer`) must
give Hammer's prompt and the grammar a schema with every ``$ref`` resolved; the real-model tests
check the stand-in calls them and the server receives the arguments.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from installed import require

from hammer_plugins import HammerEngine, Message
from hammer_plugins.grammar.builder import build_grammar
from hammer_plugins.mcp.client import MCPServer, result_text
from hammer_plugins.prompt.tools_block import hammer_entry
from hammer_plugins.tools.definition import Tool, to_tool

require("mcp")
SERVER = [sys.executable, str(Path(__file__).with_name("schema_server.py"))]
SHIP = "Ship a 2 kg parcel to Ada Lovelace at 12 Rue de Rivoli, Paris."
TAG = "Tag photo IMG_0042 with place Rome and season summer."


async def langchain_tools() -> list[Any]:
    from langchain_mcp_adapters.client import MultiServerMCPClient

    client = MultiServerMCPClient({"s": {"command": SERVER[0], "args": SERVER[1:], "transport": "stdio"}})
    return await client.get_tools()


async def llama_index_tools() -> list[Any]:
    from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

    return await McpToolSpec(client=BasicMCPClient(SERVER[0], args=SERVER[1:])).to_tool_list_async()


async def engine_tools(route: str) -> list[Tool]:
    """The tools as the engine receives them from each route."""
    if route == "langchain":
        from langchain_hammer.chat_models import _openai_tool

        return [to_tool(_openai_tool(t)) for t in await langchain_tools()]
    if route == "llama_index":
        from llama_index.llms.hammer.base import to_engine_tool

        return [to_tool(to_engine_tool(t)) for t in await llama_index_tools()]
    with MCPServer(SERVER) as server:
        return list(server.tools)


@pytest.mark.parametrize("route", ["langchain", "llama_index", "engine"])
async def test_every_schema_feature_reaches_the_prompt_resolved(route: str) -> None:
    tools = {t.name: t for t in await engine_tools(route)}
    assert set(tools) == {"ship_parcel", "tag_photo"}
    rendered = json.dumps([hammer_entry(t) for t in tools.values()])
    assert "$ref" not in rendered and "$defs" not in rendered and "anyOf" not in rendered
    ship = tools["ship_parcel"]
    address = ship.properties["address"]  # $ref resolved against $defs
    assert address["type"] == "object" and set(address["properties"]) == {"street", "city", "country"}
    assert address["required"] == ["street", "city"]
    assert ship.properties["speed"]["default"] == "standard" and ship.properties["speed"]["enum"] == ["standard", "express"]
    assert ship.properties["note"]["type"] == "string" and ship.properties["note"]["nullable"] is True  # anyOf null
    assert set(ship.required) == {"recipient", "address", "weight_kg"}
    hammer = hammer_entry(ship)["parameters"]
    assert hammer["address"]["city"]["required"] is True and hammer["address"]["required"] is True
    assert "default is 'standard'" in hammer["speed"]["description"]
    tags = tools["tag_photo"].properties["tags"]
    assert tags["type"] == "object" and tags["additionalProperties"] == {"type": "string"}
    assert tools["tag_photo"].properties["limit"]["type"] == "integer"
    build_grammar(list(tools.values()), "auto", True)  # the grammar accepts every construct


def test_the_engine_client_calls_the_server_and_reports_errors() -> None:
    from hammer_plugins.mcp.client import MCPToolError

    with MCPServer(SERVER) as server:
        echoed = json.loads(server.call("tag_photo", {"photo_id": "IMG_1", "tags": {"place": "Rome"}}))
        assert echoed == {"tool": "tag_photo", "photo_id": "IMG_1", "tags": {"place": "Rome"}, "limit": None}
        with pytest.raises(MCPToolError):
            server.call("tag_photo", {"photo_id": "IMG_1"})  # a required argument missing
    with pytest.raises(Exception, match="not running"):
        server.call("tag_photo", {})


def check_ship(arguments: dict[str, Any]) -> None:
    assert arguments["tool"] == "ship_parcel"
    assert "Ada" in arguments["recipient"] and arguments["address"]["city"] == "Paris"
    assert "Rivoli" in arguments["address"]["street"] and arguments["weight_kg"] == 2


def check_tag(arguments: dict[str, Any]) -> None:
    assert arguments["tool"] == "tag_photo" and arguments["photo_id"] == "IMG_0042"
    assert arguments["tags"].get("place") == "Rome"


@pytest.mark.real_model
@pytest.mark.parametrize(("question", "check"), [(SHIP, check_ship), (TAG, check_tag)])
async def test_langchain_mcp_tools_bind_and_are_called(question: str, check: Any) -> None:
    from langchain_hammer import ChatHammer

    tools = {t.name: t for t in await langchain_tools()}
    message = await ChatHammer().bind_tools(list(tools.values())).ainvoke(question)
    assert message.tool_calls, message
    call = message.tool_calls[0]
    result = await tools[call["name"]].ainvoke(call)  # async-only MCP tool, run by the server
    check(json.loads(result.content if isinstance(result.content, str) else result.content[0]["text"]))


@pytest.mark.real_model
@pytest.mark.parametrize(("question", "check"), [(SHIP, check_ship), (TAG, check_tag)])
async def test_llama_index_mcp_tools_bind_and_are_called(question: str, check: Any) -> None:
    from llama_index.llms.hammer import HammerLLM

    tools = {t.metadata.name: t for t in await llama_index_tools()}
    llm = HammerLLM()
    response = await llm.achat_with_tools(list(tools.values()), user_msg=question)
    selection = llm.get_tool_calls_from_response(response)[0]
    output = await tools[selection.tool_name].acall(**selection.tool_kwargs)
    check(json.loads(result_text(output.raw_output)))  # the server's CallToolResult


@pytest.mark.real_model
@pytest.mark.parametrize(("question", "check"), [(SHIP, check_ship), (TAG, check_tag)])
def test_engine_mcp_tools_bind_and_are_called(question: str, check: Any) -> None:
    with MCPServer(SERVER) as server:
        reply = HammerEngine().generate([Message.user(question)], tools=server.tools)
        assert reply.tool_calls, reply
        check(json.loads(server.call(reply.tool_calls[0].name, reply.tool_calls[0].arguments)))
