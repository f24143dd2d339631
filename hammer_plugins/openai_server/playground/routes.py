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

Both helpers take a place in the queue and run on the server's request threads, as every request does.

Example:
    >>> sorted(PAGE_FILES)
    ['playground.css', 'playground.js']
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from hammer_plugins.engine import HammerEngine
from hammer_plugins.engine.inspection import inspect_request
from hammer_plugins.openai_server.call import checked_tools, function_tools
from hammer_plugins.openai_server.chat_completions.request import parse_request
from hammer_plugins.openai_server.errors import APIError, engine_error
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


def add_playground_routes(app: FastAPI, engine: HammerEngine, model_name: str, *,
                          read_call: Callable[[Request, Callable[[Any], Any]], Awaitable[tuple[Any, Any]]],
                          request_work: Executor, time_limit: float | None,
                          tools: list[dict[str, Any]] | None = None) -> None:
    """Serve the playground on ``app``; ``tools`` (OpenAI function tools, checked already) are offered in the page
    besides the demo tools."""
    demo = [t.to_openai() for t in to_tools(DEMO_TOOLS)]
    given = list(tools or [])

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
        return {"model": model_name, "demo_tools": demo, "tools": given, "tool_budget": engine.tool_budget}

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
