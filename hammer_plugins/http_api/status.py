"""The server's own routes, which every API's clients read: ``GET /health`` and ``GET /v1/models``.

``/health`` answers 200 while the server can serve, else 503 with the reason: a call stuck well past its time
limit, a failing health check (each bounded in time, on threads of their own), or a shutdown under way.

Example:
    >>> [route.path for route in status_router().routes]
    ['/health', '/v1/models', '/v1/models/{name:path}']
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from openai.types import Model

from hammer_plugins.http_api.context import ServerContext, server_of
from hammer_plugins.http_api.errors import APIError

HEALTH_CHECK_SECONDS = 0.5
"""Longest a health check may take before /health calls it failed (/health itself answers within a second)."""

PUBLIC_PATHS = ("/health",)
"""Answered without the API key: a load balancer's probe has none."""


async def unhealthy(server: ServerContext) -> str | None:
    """Why the server cannot serve, or None."""
    reason = server.worker.stuck()
    for check in server.settings.health_checks:
        if reason is not None:
            break
        name = getattr(check, "__name__", check)
        try:
            work = asyncio.get_running_loop().run_in_executor(server.health_work, check)
            reason = await asyncio.wait_for(work, HEALTH_CHECK_SECONDS)
        except TimeoutError:
            reason = f"the health check {name!r} did not answer in {HEALTH_CHECK_SECONDS} s"
        except Exception as exc:  # noqa: BLE001 - a failing check is an unhealthy server, not a 500
            reason = f"the health check {name!r} failed: {exc}"
    if reason is None and server.worker.closing:
        reason = "the server is shutting down"
    return reason


def _model(server: ServerContext) -> dict[str, Any]:
    return Model(id=server.model_name, created=server.started, object="model", owned_by="hammer-plugins").model_dump()


def status_router() -> APIRouter:
    """The routes above."""
    router = APIRouter()

    @router.get("/health")
    async def health(request: Request) -> JSONResponse:
        server = server_of(request)
        worker = server.worker
        reason = await unhealthy(server)
        body: dict[str, Any] = {
            "status": "ok" if reason is None else "unavailable", "model": server.model_name,
            "loaded": server.engine.is_loaded, "reading": worker.reading, "waiting": worker.waiting,
            "running": worker.running, "peak_running": worker.peak_running, "completed": worker.completed,
            "cancelled": worker.cancelled, "refused": worker.refused, "timed_out": worker.timed_out,
            "counting": server.counting}
        cache = server.engine.backend.cache_stats() if server.engine.is_loaded else None  # never loads the model
        if cache is not None:  # the in-process prompt cache: states, bytes, budget, hit rates
            body["prompt_cache"] = cache
        if reason is not None:
            body["reason"] = reason
        return JSONResponse(body, status_code=200 if reason is None else 503)

    @router.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        return {"object": "list", "data": [_model(server_of(request))]}

    @router.get("/v1/models/{name:path}")
    async def one_model(name: str, request: Request) -> dict[str, Any]:
        server = server_of(request)
        if name != server.model_name:
            raise APIError(404, f"The model {name[:100]!r} does not exist. This server serves {server.served}.",
                           param="model", code="model_not_found")
        return _model(server)

    return router
