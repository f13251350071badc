"""Errors to HTTP: the one function that maps every `Code` to a status
(docs/architecture.md#hub)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from agentpost.core.errors import AgentpostError, Code

log = logging.getLogger("agentpost.hub")

STATUS: dict[Code, int] = {
    Code.INVALID_JSON: 400,
    Code.INVALID_REQUEST: 400,
    Code.INVALID_IDEMPOTENCY_KEY: 400,
    Code.SEARCH_QUERY_INVALID: 400,
    Code.INVALID_EMOJI: 400,
    Code.UNAUTHORIZED: 401,
    Code.FORBIDDEN: 403,
    Code.AGENT_REMOVED: 403,
    Code.MEMBER_REMOVED: 403,
    Code.CHANNEL_MEMBERSHIP_REQUIRED: 403,
    Code.NOT_EVENT_SENDER: 403,
    Code.NOT_FOUND: 404,
    Code.ROOM_NOT_FOUND: 404,
    Code.NO_WORKSPACE: 404,
    Code.MEMBER_NOT_FOUND: 404,
    Code.MEDIA_NOT_FOUND: 404,
    Code.EVENT_NOT_FOUND: 404,
    Code.SEND_NOT_FOUND: 404,
    Code.TASK_NOT_FOUND: 404,
    Code.NOT_LEASED: 404,
    Code.RESERVATION_NOT_FOUND: 404,
    Code.METHOD_NOT_ALLOWED: 405,
    Code.WORKSPACE_EXISTS: 409,
    Code.MEMBER_EXISTS: 409,
    Code.ROOM_EXISTS: 409,
    Code.ROOM_ARCHIVED: 409,
    Code.THREAD_CONFLICT: 409,
    Code.IDEMPOTENCY_IN_FLIGHT: 409,
    Code.LEASE_HELD: 409,
    Code.LEASE_LOST: 409,
    Code.RESERVATION_CONFLICT: 409,
    Code.RESERVATION_ENDED: 409,
    Code.EVENT_REDACTED: 409,
    Code.REACTION_LIMIT: 409,
    Code.MEDIA_REDACTED: 410,
    Code.MEDIA_EXPIRED: 410,
    Code.PAYLOAD_TOO_LARGE: 413,
    Code.UNSUPPORTED_MEDIA_TYPE: 415,
    Code.IDEMPOTENCY_CONFLICT: 422,
    Code.COMMAND_REJECTED: 422,
    Code.INVALID_RELATION_TARGET: 422,
    Code.TOO_MANY_STREAMS: 429,
    Code.MEDIA_MISSING: 500,
    Code.INTERNAL: 500,
    Code.STORAGE_UNAVAILABLE: 503,
}


def status_of(code: Code) -> int:
    return STATUS.get(code, 500)


class JsonResponse(Response):
    """A JSON answer whose raw headers are built straight away: Starlette's `Response`
    renders and scans its headers generically, a cost every post pays (issue 29)."""

    media_type = "application/json"

    def __init__(self, status: int, body: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.status_code = status
        self.body = body
        self.background = None
        raw = [(b"content-length", b"%d" % len(body)), (b"content-type", b"application/json")]
        if headers:
            raw.extend(
                (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()
            )
        self.raw_headers = raw


def json_response(status: int, body: bytes, headers: Mapping[str, str] | None = None) -> Response:
    return JsonResponse(status, body, headers)


def error_response(exc: AgentpostError, headers: Mapping[str, str] | None = None) -> Response:
    out = dict(headers or {})
    if exc.code is Code.IDEMPOTENCY_IN_FLIGHT:
        out["Retry-After"] = "1"
    if exc.code in (Code.STORAGE_UNAVAILABLE, Code.TOO_MANY_STREAMS):
        out["Retry-After"] = "5"
    if exc.code is Code.UNAUTHORIZED:
        out["WWW-Authenticate"] = "Bearer"
    return json_response(status_of(exc.code), msgspec.json.encode(exc.body()), out)


async def handle_agentpost_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AgentpostError)
    return error_response(exc)


async def handle_unknown(request: Request, exc: Exception) -> Response:
    log.exception("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(AgentpostError(Code.INTERNAL, "internal error; it was logged"))


async def handle_client_gone(request: Request, exc: Exception) -> Response:
    """The client hung up before its body arrived: nothing was done, nobody reads an answer."""
    log.info("client left during %s %s; nothing was posted", request.method, request.url.path)
    return Response(status_code=400)
