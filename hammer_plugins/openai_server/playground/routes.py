"""The playground's routes: the page (static files shipped in the package, nothing fetched from elsewhere) and
two read-only helpers behind the API key, so that the page shows what Hammer sees.

- ``GET /`` and ``GET /playground/static/<file>``: the page, answered without the key (it holds nothing
  secret; every request it makes sends the key), with a strict Content-Security-Policy (scripts and styles
  from this server only, no inline code, no frames, requests to this origin only).
- ``GET /playground/api/config``: the model's name, the demo tools and the tools given on the command line.
- ``POST /playground/api/tools``: a tool set checked as the APIs check it (the same 400 in OpenAI's error
  JSON) and each tool's estimated cost in the tools block.
- ``POST /playground/api/inspect``: a Chat Completions body as the model would read it
  (:func:`~hammer_plugins.engine.inspection.inspect_request`): the prompt, the offered tools, the names
  the model reads. Nothing runs.
- ``POST /playground/api/slot_filling``: one slot-filling turn (``{"history": [...], "tools": [...], "grounding":
  "report" | "enforce" | "off"}``, the
  history as :func:`~hammer_plugins.slot_filling.snapshots.dump_history` writes it, snapshots included):
  the engine's slot-filling call through the app's one route body (queue, time limit, a client that
  leaves), answered with the decision, the turn's snapshot, the assistant message to append and what the
  snapshot call read (its prompt and offered tools).

- ``POST /playground/api/run``: one call of an MCP server's tool (``hammer playground --mcp``), sent once the
  person approved it in the page; its result text.

The helpers take a place in the queue and run on the server's request threads, as every request does.

Example:
    >>> sorted(PAGE_FILES)
    ['playground.css', 'playground.js']
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from hammer_plugins.engine import HammerEngine
from hammer_plugins.engine.inspection import inspect_request
from hammer_plugins.mcp.client import MCPToolError
from hammer_plugins.openai_server.call import EngineCall, checked_tools, function_tools
from hammer_plugins.openai_server.chat_completions.request import parse_request
from hammer_plugins.openai_server.errors import APIError, api_errors_only, engine_error
from hammer_plugins.openai_server.framing import Framing
from hammer_plugins.output.response import HammerResponse
from hammer_plugins.slot_filling.filler import SlotFiller
from hammer_plugins.slot_filling.snapshots import SnapshotMessage, dump_history, load_history
from hammer_plugins.tools.definition import to_tools
from hammer_plugins.tools.demo import DEMO_TOOLS

STATIC_PATH = "/playground/static/"
"""Where the page's files are served, without the key."""

PAGE_FILES = {"playground.js": "text/javascript", "playground.css": "text/css"}

CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                           "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
"""The page's policy: its own scripts and styles only (no inline code, so injected markup cannot run), requests
to this server only, never framed by another site."""

PAGE_HEADERS = {"content-security-policy": CONTENT_SECURITY_POLICY, "x-content-type-options": "nosniff",
                "referrer-policy": "no-referrer", "cache-control": "no-cache"}


def _static(name: str) -> bytes:
    return resources.files(__package__).joinpath("static", name).read_bytes()


class SlotFillingFraming(Framing):
    """A slot-filling turn's answer for the page: the decision, the snapshot, the message to append, and what the
    snapshot call read (``view``: its prompt and offered tools; never streamed)."""

    def __init__(self, view: dict[str, Any] | None = None) -> None:
        self.view = view

    def body(self, final: HammerResponse) -> dict[str, Any]:
        snapshot = getattr(final, "snapshot", None)
        calls = final.tool_calls if getattr(final, "slot_filling_action", None) == "execute" else []
        message = SnapshotMessage(role="assistant", content=final.text, tool_calls=calls, snapshot=snapshot)
        return {"action": getattr(final, "slot_filling_action", None), "text": final.text,
                "calls": [c.model_dump(mode="json") for c in calls],
                "snapshot": snapshot.model_dump(mode="json") if snapshot is not None else None,
                "message": dump_history([message])[0],
                "usage": final.usage.model_dump(mode="json"), "view": self.view}

    def error(self, error: APIError) -> bytes:  # never streamed
        raise NotImplementedError


def slot_filling_call(body: Any) -> EngineCall:
    """A slot-filling turn's body as an engine call (a 400 naming what is wrong); ``options["slot_filling"]`` holds
    the filler's settings."""
    if not isinstance(body, dict) or not isinstance(body.get("history"), list) or not body["history"]:
        raise APIError(400, "The body must be {\"history\": [...], \"tools\": [...]}, with at least the user's message.",
                       param="history", code="invalid_value")
    tools = checked_tools(function_tools(body.get("tools") or []))
    if not tools:
        raise APIError(400, "Slot filling needs at least one tool.", param="tools", code="invalid_value")
    try:
        history = load_history(body["history"])
    except (ValueError, TypeError) as exc:
        raise APIError(400, f"history: {exc}", param="history", code="invalid_value") from None
    grounding = body.get("grounding", "report")
    if grounding not in ("report", "enforce", "off"):
        raise APIError(400, "grounding must be report, enforce or off.", param="grounding", code="invalid_value")
    return EngineCall(messages=history, tools=tools, tool_choice="auto", options={"slot_filling": {"grounding": grounding}})


def add_playground_routes(app: FastAPI, engine: HammerEngine, model_name: str, *,
                          read_call: Callable[[Request, Callable[[Any], Any]], Awaitable[tuple[Any, Any]]],
                          answer: Callable[..., Awaitable[Response]], request_work: Executor, time_limit: float | None,
                          tools: Sequence[dict[str, Any]] = (),
                          runners: Mapping[str, Callable[..., Any]] | None = None, errors: Sequence[str] = ()) -> None:
    """Serve the playground on ``app``; ``tools`` (OpenAI function tools, checked already) are offered in the page
    besides the demo tools; ``runners`` (an MCP server's tools, by name) may be run from the page once the person
    approves a call; ``errors`` are shown in the page (an MCP server that did not start)."""
    demo = [t.to_openai() for t in to_tools(DEMO_TOOLS)]
    given = list(tools)
    runnable = dict(runners or {})

    @app.get("/")
    async def page() -> Response:
        return Response(_static("index.html"), media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    @app.get(STATIC_PATH + "{name}")
    async def static(name: str) -> Response:
        if name not in PAGE_FILES:
            raise APIError(404, f"No playground file {name[:80]!r}.", code="not_found")
        return Response(_static(name), media_type=PAGE_FILES[name], headers=PAGE_HEADERS)

    @app.get("/playground/api/config")
    async def config() -> dict[str, Any]:
        return {"model": model_name, "demo_tools": demo, "tools": given, "tool_budget": engine.tool_budget,
                "runnable": sorted(runnable), "errors": list(errors)}

    async def off_loop(request: Request, parse: Callable[[Any], Any], work: Callable[[Any], Any]) -> Response:
        place, parsed = await read_call(request, parse)
        if place is None:
            return parsed
        try:
            future = asyncio.get_running_loop().run_in_executor(request_work, lambda: work(parsed))
            return JSONResponse(await asyncio.wait_for(future, time_limit or None))
        except TimeoutError:
            raise APIError(504, "The playground's request did not finish within the server's time limit.",
                           type="server_error", code="timeout") from None
        except APIError:
            raise
        except Exception as exc:  # noqa: BLE001 - the engine refused the request: the API's own error
            raise engine_error(exc) from None
        finally:
            place.release()

    def tool_set(body: Any) -> list[dict[str, Any]]:
        if not isinstance(body, dict) or not isinstance(body.get("tools"), list):
            raise APIError(400, "The body must be {\"tools\": [...]}, a list of OpenAI function tools.", param="tools",
                           code="invalid_value")
        return checked_tools(function_tools(body["tools"]))

    def costs(checked: list[dict[str, Any]]) -> dict[str, Any]:
        view = inspect_request(engine, [{"role": "user", "content": ""}], checked)
        return {"tools": [{"name": name, "cost": view.tool_costs[name]} for name in view.tools],
                "total": sum(view.tool_costs.values()), "context_window": engine.backend.context_window,
                "tool_budget": engine.tool_budget}

    @app.post("/playground/api/tools")
    async def check_tools(request: Request) -> Response:
        return await off_loop(request, tool_set, costs)

    def inspect(call: Any) -> dict[str, Any]:
        view = inspect_request(engine, call.messages, call.tools, call.tool_choice,
                               mask_names=call.options.get("mask_names"),
                               response_format=call.options.get("response_format"))
        return view.to_dict()

    @app.post("/playground/api/inspect")
    async def inspect_route(request: Request) -> Response:
        return await off_loop(request, lambda body: parse_request(body, model_name), inspect)

    def run_call(body: Any) -> tuple[Callable[..., Any], dict[str, Any]]:
        if not isinstance(body, dict) or not isinstance(body.get("name"), str) or not isinstance(
                body.get("arguments", {}), dict):
            raise APIError(400, "The body must be {\"name\": \"tool\", \"arguments\": {...}}.", param="name",
                           code="invalid_value")
        if body["name"] not in runnable:
            raise APIError(404, f"No tool {body['name'][:80]!r} runs on this server: only the --mcp servers' tools "
                                f"do ({', '.join(sorted(runnable)[:20]) or 'none'}).", param="name", code="not_found")
        return runnable[body["name"]], dict(body.get("arguments") or {})

    def run(parsed: tuple[Callable[..., Any], dict[str, Any]]) -> dict[str, Any]:
        function, arguments = parsed
        try:
            return {"result": str(function(**arguments))}
        except MCPToolError as exc:  # the tool failed, or timed out (its server restarted): the tool's error
            raise APIError(502, f"The tool failed: {exc}", type="server_error", code="tool_failed") from None

    @app.post("/playground/api/run")
    async def run_route(request: Request) -> Response:
        """Run one approved call through its MCP server (the server's own timeout bounds it)."""
        return await off_loop(request, api_errors_only(run_call), run)

    def slot_turn(body: Any) -> tuple[EngineCall, dict[str, Any]]:
        """The call, and what its snapshot call reads (the filler's first pass, planned as the engine plans it)."""
        call = slot_filling_call(body)
        filler = SlotFiller(engine, call.tools, **call.options["slot_filling"])
        messages, shown = next(filler.steps(call.messages))
        return call, inspect_request(engine, messages, shown).to_dict()

    @app.post("/playground/api/slot_filling")
    async def slot_filling(request: Request) -> Response:
        place, parsed = await read_call(request, api_errors_only(slot_turn))
        if place is None:
            return parsed
        call, view = parsed
        return await answer(request, place, call, SlotFillingFraming(view))
