"""The Responses door: ``POST /v1/responses`` (typed events as server-sent events, or one ``response`` object)
and ``GET /v1/responses/{id}`` (a 404: this server is stateless); errors in OpenAI's shape.

Example:
    >>> from hammer_plugins.http_api.context import ServerSettings
    >>> [route.path for route in responses_door(ServerSettings()).router.routes]
    ['/v1/responses', '/v1/responses/{response_id}']
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from hammer_plugins.http_api.context import ServerSettings
from hammer_plugins.http_api.door import Door
from hammer_plugins.http_api.errors import APIError
from hammer_plugins.http_api.framing import TypedEventFraming
from hammer_plugins.http_api.respond import serve_request
from hammer_plugins.http_api.responses.request import read_responses
from hammer_plugins.http_api.responses.writer import ResponsesWriter


def responses_door(settings: ServerSettings) -> Door:
    """The door's routes."""
    router = APIRouter()

    @router.post("/v1/responses")
    async def responses(request: Request) -> Response:
        return await serve_request(request, read_responses,
                                   lambda server, parsed: TypedEventFraming(ResponsesWriter(parsed.meta())))

    @router.get("/v1/responses/{response_id}")
    async def stored_response(response_id: str) -> Response:
        raise APIError(404, f"No response with id {response_id[:100]!r}: this server is stateless and stores no "
                            "responses.", param="response_id", code="not_found")

    return Door("responses", router)
