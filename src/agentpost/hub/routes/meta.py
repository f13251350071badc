"""Unauthenticated routes: health, capabilities, metrics, the OpenAPI document."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from agentpost import __version__
from agentpost.hub import idempotency, relations
from agentpost.hub.errors import json_response
from agentpost.hub.openapi import document_bytes
from agentpost.hub.state import hub_of

FEATURES = [
    "room_post_idempotency",
    "media",
    "sse",
    "inbox",
    "threads",
    "delivery_state",
    "presence",
    "search",
    "relations",
    "read_markers",  # POST /v1/rooms/{room}/read; rooms carry read_seq and unread
    "room_presence",  # a room stream's presence frames with ?presence=1
    "export",  # GET /v1/rooms/{room}/export, the operator's workspace export
]


async def healthz(request: Request) -> Response:
    return json_response(200, b'{"status":"ok"}')


def capabilities_body(max_upload_bytes: int, ttl_seconds: int) -> dict[str, object]:
    return {
        "version": __version__,
        "room_post_idempotency": {
            "header": idempotency.HEADER,
            "status_header": idempotency.STATUS_HEADER,
            "ttl_seconds": ttl_seconds,
            "routes": [
                "POST /v1/rooms/{room}/messages",
                "POST /v1/rooms/{room}/media",
                relations.EDITS_ROUTE,
                relations.REACTIONS_ROUTE,
                relations.REDACTIONS_ROUTE,
            ],
        },
        "max_upload_bytes": max_upload_bytes,
        "features": FEATURES,
    }


async def capabilities(request: Request) -> Response:
    cfg = hub_of(request).config
    return json_response(
        200, msgspec.json.encode(capabilities_body(cfg.max_upload_bytes, cfg.key_ttl_seconds))
    )


async def metrics(request: Request) -> Response:
    m = hub_of(request).metrics
    return Response(m.render(), media_type=m.content_type)


async def openapi(request: Request) -> Response:
    return json_response(200, document_bytes())
