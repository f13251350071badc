"""The OpenAPI 3.1 document of the hub API (docs/api.md), served at `/openapi.json`.

Request bodies are the JSON Schemas of the very msgspec Structs the routes decode, and error
statuses come from the one code→status map in `hub/errors.py`, so neither can drift; every
route must appear here (a test compares with `app.ROUTES`, and schemathesis fuzzes the rest).

Each route domain describes its own routes in a module of this package, beside
`hub/routes/<domain>.py`; what they share (the reply Structs, the refusals, the parameters,
`operation`, `sse`, `error_responses`) is in `common`. This module only assembles them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import msgspec

from agentpost import __version__
from agentpost.hub.openapi import (
    admin,
    events,
    export,
    inbox,
    leases,
    members,
    messages,
    meta,
    relations,
    reservations,
    rooms,
    search,
    threads,
    web,
)
from agentpost.hub.openapi.common import STRUCTS, InboxItem

# The parts in the document's order (its bytes are part of the API: keep it stable).
PARTS: list[Callable[[], dict[str, dict[str, Any]]]] = [
    meta.operations,
    admin.operations,
    rooms.operations,
    messages.post_operations,
    events.operations,
    messages.media_operations,
    inbox.operations,
    members.operations,
    messages.cancel_operations,
    search.operations,
    threads.operations,
    relations.operations,
    leases.operations,
    web.operations,
    export.operations,
    reservations.operations,
]


def _paths() -> dict[str, dict[str, Any]]:
    """Every route of `app.ROUTES`, by path then method; a path in two parts is a mistake."""
    paths: dict[str, dict[str, Any]] = {}
    for part in PARTS:
        ops = part()
        twice = paths.keys() & ops.keys()
        if twice:
            raise RuntimeError(f"OpenAPI paths described twice: {sorted(twice)}")
        paths.update(ops)
    return paths


@functools.cache
def _document() -> bytes:
    _, components = msgspec.json.schema_components(
        [*STRUCTS, InboxItem], ref_template="#/components/schemas/{name}"
    )
    doc = {
        "openapi": "3.1.0",
        "info": {
            "title": "agentpost hub",
            "version": __version__,
            "description": "JSON everywhere; errors are "
            '`{"error": {"code", "message", ...}}` (docs/api.md).',
        },
        "paths": _paths(),
        "components": {
            "schemas": components,
            "securitySchemes": {
                "memberToken": {"type": "http", "scheme": "bearer", "description": "member token"},
                "adminToken": {"type": "http", "scheme": "bearer", "description": "admin token"},
                "streamTicket": {
                    "type": "apiKey",
                    "in": "query",
                    "name": "ticket",
                    "description": "a stream ticket from `POST /v1/rooms/{room}/stream-ticket`:"
                    " opens only that room's stream, for 60 s (docs/api.md)",
                },
            },
        },
    }
    return msgspec.json.encode(doc)


def document() -> dict[str, Any]:
    """The document as a fresh dict (callers may change their copy)."""
    doc: dict[str, Any] = msgspec.json.decode(_document())
    return doc


def document_bytes() -> bytes:
    """The document as served: built once, the same bytes every time."""
    return _document()
