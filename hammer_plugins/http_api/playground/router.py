"""The playground's routes: the page (static files shipped in the package, nothing fetched from elsewhere) and
its helpers, behind the API key and the page's per-start token, so that the page shows what Hammer sees.

- ``GET /`` and ``GET /playground/static/<file>``: the page, answered without the key (it holds nothing
  secret; every request it makes sends the key and the token), with a strict Content-Security-Policy (scripts
  and styles from this server only, no inline code, no frames, requests to this origin only).

Every ``/playground/api/*`` route needs the token (:data:`~hammer_plugins.http_api.playground.approvals.TOKEN_HEADER`,
printed on the terminal in the page's address), even with no API key, and only the page's own origin may call
them (the guard refuses another origin, preflight included, with no CORS grant):
- ``GET /playground/api/config``: the model's name, its file or preset (and, for the embedded stand-in, what it
  is and how to get a Hammer model), the demo tools and the tools given on the command line.
- ``POST /playground/api/tools``: a tool set checked as the APIs check it (the same 400 in OpenAI's error
  JSON) and each tool's estimated cost in the tools block.
- ``POST /playground/api/inspect``: a Chat Completions body as the model would read it
  (:func:`~hammer_plugins.engine.inspection.inspect_request`): the prompt, the offered tools, the names
  the model reads. Nothing runs.
- ``POST /playground/api/slot_filling``: one slot-filling turn (``{"history": [...], "tools": [...], "grounding":
  "report" | "enforce" | "off", "relevance_gate": true | false}``, the gate left out: the server's setting; the
  history as :func:`~hammer_plugins.slot_filling.snapshots.dump_history` writes it, snapshots included):
  the engine's slot-filling call through the app's one route body (queue, time limit, a client that
  leaves), answered with the decision, the turn's snapshot, the assistant message to append and what the model
  read, pass by pass (``passes``: each snapshot call as the engine took it, a gate refusal marked as not run; as
  ``hammer_passes`` below).

- ``POST /playground/api/chat``: ``/v1/chat/completions`` for the page: the same request and answer, and each
  call of an ``--mcp`` server's tool recorded (:class:`~hammer_plugins.http_api.playground.approvals.ApprovalStore`)
  with an approval the answer carries (a last ``{"hammer_approvals": [...]}`` chunk; a field of that name in a
  whole answer), and what the model read, pass by pass (``{"hammer_passes": [...]}``, the same way: each pass's
  prompt, offered tools, shown names and whether the model ran). The body may set ``relevance_gate`` (true or
  false) for this request (:mod:`~hammer_plugins.http_api.playground.page_chat`).
- ``POST /playground/api/run``: ``{"call_id", "approval"}``: one recorded call run through its MCP server, with
  the arguments the model gave it, once, when the person approves it in the page; its result text.
- ``POST /playground/api/decline``: the same body: the call is forgotten and can no longer run.

The helpers take a place in the queue and run on the server's request threads, as every request does.

Example:
    >>> sorted(PAGE_FILES)
    ['playground.css', 'playground.js', 'snippets.js']
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection
from importlib import resources
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from hammer_plugins.engine import StreamEvent
from hammer_plugins.engine.inspection import inspect_request
from hammer_plugins.engine.request import EngineRequest
from hammer_plugins.http_api.chat_completions.request import read_chat
from hammer_plugins.http_api.chat_completions.router import ChatFraming
from hammer_plugins.http_api.context import ServerContext, ServerSettings, server_of
from hammer_plugins.http_api.door import Door
from hammer_plugins.http_api.errors import APIError, api_errors_only
from hammer_plugins.http_api.framing import Framing
from hammer_plugins.http_api.playground.approvals import TOKEN_HEADER, ApprovalStore, RunRequest, token_matches
from hammer_plugins.http_api.playground.page_chat import model_card, page_gate, read_page_chat
from hammer_plugins.http_api.request_checks import FieldNames, engine_request, function_tools, located
from hammer_plugins.http_api.respond import read_body, respond, run_off_loop, serve_request
from hammer_plugins.mcp.client import MCPToolError
from hammer_plugins.output.response import HammerResponse
from hammer_plugins.slot_filling.snapshots import SnapshotMessage, dump_history, load_history
from hammer_plugins.tools.definition import to_tools
from hammer_plugins.tools.demo import DEMO_TOOLS
from hammer_plugins.values.errors import RequestError

STATIC_PATH = "/playground/static/"
"""Where the page's files are served, without the key."""

API_PATH = "/playground/api/"
"""Where the page's helpers are: the page's token and its own origin only."""

PAGE_FILES = {"playground.js": "text/javascript", "playground.css": "text/css", "snippets.js": "text/javascript"}

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
    model read (``passes``: each snapshot call as it ran, recorded by the engine, never planned again; a focused
    call that answered ``[]`` is followed by the one with every tool). Never streamed."""

    def body(self, final: HammerResponse) -> dict[str, Any]:
        snapshot = getattr(final, "snapshot", None)
        calls = final.tool_calls if getattr(final, "slot_filling_action", None) == "execute" else []
        message = SnapshotMessage(role="assistant", content=final.text, tool_calls=calls, snapshot=snapshot)
        return {"action": getattr(final, "slot_filling_action", None), "text": final.text,
                "calls": [c.model_dump(mode="json") for c in calls],
                "snapshot": snapshot.model_dump(mode="json") if snapshot is not None else None,
                "message": dump_history([message])[0],
                "usage": final.usage.model_dump(mode="json"), "passes": passes_of(final)}

    def error(self, error: APIError) -> bytes:  # never streamed
        raise NotImplementedError


class _ToolSet:
    """A body's tool set as the door's request: the engine's rules check the tools (a 400 naming ``tools[i]``)."""

    def __init__(self, tools: list[dict[str, Any]], messages: list[Any] | None = None, **options: Any) -> None:
        self.tools = tools
        self.messages = messages or [{"role": "user", "content": ""}]
        self.options = options

    def to_engine_request(self) -> EngineRequest:
        return EngineRequest.of(self.messages, self.tools, **self.options)

    def api_error(self, exc: RequestError, request: EngineRequest) -> APIError:
        names = FieldNames(messages=["history"] * len(request.messages), message_id="tool_call_id",
                           tools=[f"tools[{i}].function" for i in range(len(self.tools))], tool_schema="parameters",
                           tool_name="name", conversation="history")
        return located(exc, names)


def tool_set(body: Any) -> EngineRequest:
    """``{"tools": [...]}``: OpenAI function tools, checked as the APIs check them."""
    if not isinstance(body, dict) or not isinstance(body.get("tools"), list):
        raise APIError(400, "The body must be {\"tools\": [...]}, a list of OpenAI function tools.", param="tools",
                       code="invalid_value")
    return engine_request(_ToolSet(function_tools(body["tools"])))


def slot_filling_call(body: Any) -> EngineRequest:
    """A slot-filling turn's body as an engine request (a 400 naming what is wrong), with ``slot_filling`` set to
    the filler's settings, each snapshot call recorded as it runs (``record_passes``: the page's prompt panel), and
    the relevance gate as the page set it."""
    if not isinstance(body, dict) or not isinstance(body.get("history"), list) or not body["history"]:
        raise APIError(400, "The body must be {\"history\": [...], \"tools\": [...]}, with at least the user's message.",
                       param="history", code="invalid_value")
    tools = function_tools(body.get("tools") or [])
    if not tools:
        raise APIError(400, "Slot filling needs at least one tool.", param="tools", code="invalid_value")
    try:
        history = load_history(body["history"])
    except (ValueError, TypeError) as exc:
        raise APIError(400, f"history: {exc}", param="history", code="invalid_value") from None
    grounding = body.get("grounding", "report")
    if grounding not in ("report", "enforce", "off"):
        raise APIError(400, "grounding must be report, enforce or off.", param="grounding", code="invalid_value")
    return engine_request(_ToolSet(tools, history, slot_filling={"grounding": grounding}, record_passes=True,
                                   relevance_gate=page_gate(body)))


def tool_costs(server: ServerContext, checked: EngineRequest) -> dict[str, Any]:
    """Each tool's estimated cost in the tools block, the total, the window and the budget."""
    view = inspect_request(server.engine, checked)
    return {"tools": [{"name": name, "cost": view.tool_costs[name]} for name in view.tools],
            "total": sum(view.tool_costs.values()), "context_window": server.engine.backend.context_window,
            "tool_budget": server.engine.tool_budget}


class ApprovalFraming(Framing):
    """Chat Completions' framing for the page, and each call of a runnable tool recorded with its approval: a last
    ``data: {"hammer_approvals": [...]}`` chunk of a stream (before ``[DONE]``; OpenAI's clients skip a chunk
    without ``choices``), a ``hammer_approvals`` field of a whole answer.

    Example:
        >>> framing = ApprovalFraming(ChatFraming("hammer", "Sorry.", include_usage=False), ApprovalStore(), {"clock"})
        >>> from hammer_plugins.values.calls import ToolCall
        >>> b"hammer_approvals" in b"".join(framing.event(HammerResponse(kind="tool_calls", tool_calls=[
        ...     ToolCall(name="clock", arguments={"tz": "UTC"})])))
        True
    """

    def __init__(self, chat: ChatFraming, store: ApprovalStore, runnable: Collection[str]) -> None:
        self.chat = chat
        self.store = store
        self.runnable = runnable

    def start(self) -> list[bytes]:
        return self.chat.start()

    def event(self, event: StreamEvent) -> list[bytes]:
        framed = self.chat.event(event)
        if isinstance(event, HammerResponse):  # the last event: its calls are the ones the stream carried
            offers = self.store.record(event.tool_calls, self.runnable)
            if offers:
                framed.append(b"data: " + json.dumps({"hammer_approvals": offers}, ensure_ascii=False).encode()
                              + b"\n\n")
            if event.passes is not None:  # what the model read for this answer: the prompt panel's
                framed.append(b"data: " + json.dumps({"hammer_passes": passes_of(event)}, ensure_ascii=False).encode()
                              + b"\n\n")
        return framed

    def error(self, error: APIError) -> bytes:
        return self.chat.error(error)

    def end(self) -> list[bytes]:
        return self.chat.end()

    def body(self, final: HammerResponse) -> dict[str, Any]:
        return {**self.chat.body(final), "hammer_approvals": self.store.record(final.tool_calls, self.runnable),
                "hammer_passes": passes_of(final)}


def passes_of(final: HammerResponse) -> list[dict[str, Any]]:
    """What the model read for ``final``, pass by pass (empty when the request did not ask)."""
    return [p.model_dump(mode="json") for p in final.passes or []]


def run_tool(function: Callable[..., Any], arguments: dict[str, Any]) -> dict[str, Any]:
    try:
        return {"result": str(function(**arguments))}
    except MCPToolError as exc:  # the tool failed, or timed out (its server restarted): the tool's error
        raise APIError(502, f"The tool failed: {exc}", type="server_error", code="tool_failed") from None


def token_check(token: str) -> Callable[[Request], Awaitable[None]]:
    """The dependency every helper route takes: the page's token in :data:`TOKEN_HEADER` (before any body is
    read), else 403. An API key, when the server has one, is checked before it (401)."""

    async def check(request: Request) -> None:
        if not token_matches(request.headers.get(TOKEN_HEADER), token):
            raise APIError(403, "The playground's helpers need the token this server printed when it started (the "
                                "page's address ends in #token=...). Fix: open the address hammer printed, or paste "
                                "its token into the page.", code="playground_token_required")

    return check


def tool_routes(router: APIRouter, token: list[Any], runners: dict[str, Callable[..., Any]]) -> None:
    """The routes that run tools: the page's chat (the calls recorded with their approvals), ``/run`` and
    ``/decline``, over one store of this door's approvals."""
    approvals = ApprovalStore()

    @router.post(API_PATH + "chat", dependencies=token)
    async def chat(request: Request) -> Response:
        """``/v1/chat/completions``, with the calls the page may run recorded for their approval."""
        return await serve_request(request, read_page_chat, lambda server, body: ApprovalFraming(
            ChatFraming(server.model_name, server.engine.refusal_text, body.include_usage), approvals, runners))

    @router.post(API_PATH + "run", dependencies=token)
    async def run_route(request: Request) -> Response:
        """Run one approved call, as the model made it, once (the MCP server's own timeout bounds it)."""
        place, run = await read_body(request, api_errors_only(RunRequest.read))
        try:
            pending = approvals.claim(run)  # marked as run before it runs: a second request is refused
        except BaseException:
            place.release()
            raise
        function = runners[pending.name]
        return JSONResponse(await run_off_loop(request, place, lambda: run_tool(function, pending.arguments())))

    @router.post(API_PATH + "decline", dependencies=token)
    async def decline(request: Request) -> Response:
        """Forget a declined call: it can no longer run."""
        place, run = await read_body(request, api_errors_only(RunRequest.read))
        place.release()
        return JSONResponse({"forgotten": approvals.discard(run)})


def playground_door(settings: ServerSettings) -> Door:
    """The page and its helpers (each helper behind the page's token, on the page's own origin only)."""
    router = APIRouter()
    # On every helper route, each named (a router included in another shows as one opaque entry in app.routes);
    # tests/openai_server/test_playground_approval.py checks that no /playground/api/ route goes without it.
    token = [Depends(token_check(settings.playground_token))]
    demo = [t.to_openai() for t in to_tools(DEMO_TOOLS)]
    runners = dict(settings.playground_runners or {})

    @router.get("/")
    async def page() -> Response:
        return Response(_static("index.html"), media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    @router.get(STATIC_PATH + "{name}")
    async def static(name: str) -> Response:
        if name not in PAGE_FILES:
            raise APIError(404, f"No playground file {name[:80]!r}.", code="not_found")
        return Response(_static(name), media_type=PAGE_FILES[name], headers=PAGE_HEADERS)

    @router.get(API_PATH + "config", dependencies=token)
    async def config(request: Request) -> dict[str, Any]:
        server = server_of(request)
        return {"model": server.model_name, "model_card": model_card(server.engine), "demo_tools": demo,
                "tools": list(settings.playground_tools),
                "tool_budget": server.engine.tool_budget, "runnable": sorted(runners),
                "errors": list(settings.playground_errors)}

    @router.post(API_PATH + "tools", dependencies=token)
    async def check_tools(request: Request) -> Response:
        server = server_of(request)
        place, checked = await read_body(request, api_errors_only(tool_set))
        return JSONResponse(await run_off_loop(request, place, lambda: tool_costs(server, checked)))

    @router.post(API_PATH + "inspect", dependencies=token)
    async def inspect_route(request: Request) -> Response:
        server = server_of(request)
        place, (_, call) = await read_body(request, lambda body: read_chat(body, server.served))
        return JSONResponse(await run_off_loop(request, place, lambda: inspect_request(server.engine, call).to_dict()))

    tool_routes(router, token, runners)

    @router.post(API_PATH + "slot_filling", dependencies=token)
    async def slot_filling(request: Request) -> Response:
        place, call = await read_body(request, api_errors_only(slot_filling_call))
        return await respond(request, place, call, SlotFillingFraming(), stream=False)

    return Door("playground", router, public_paths=("/",), public_prefixes=(STATIC_PATH,),
                same_origin_prefixes=(API_PATH,))
