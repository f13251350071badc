"""Posts (hub/routes/messages.py): a message, a file, a Turn's cancel; and a file's download.
Three parts, as the document places them (see `agentpost.hub.openapi`)."""

from __future__ import annotations

from typing import Any

from agentpost.core.errors import Code
from agentpost.hub.openapi.common import (
    AUTH,
    BODY,
    IDEMPOTENCY_KEY,
    IDEMPOTENCY_STATUS,
    MEDIA_ID,
    MEMBER,
    POST,
    ROOM_ID,
    WORKER_FENCE,
    WRITE,
    json_content,
    operation,
)

CAUSE = {
    "name": "Agentpost-Cause",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
    "description": "the event a Worker's post serves, its Turn's trigger (docs/delegation.md"
    ' "Cause"): taken only beside the Worker\'s lease fence, for an event that woke the agent',
}

MEDIA_BODY = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file"],
                "additionalProperties": False,
                "properties": {
                    "file": {"type": "string", "contentMediaType": "application/octet-stream"},
                    "text": {"type": "string", "maxLength": 65536},
                },
            },
            # Any media type (RFC 9110 §8.3.1, ASCII, at most 255 characters); a part
            # Content-Type that is none is 400 `invalid_request` (hub/mediatypes.py).
            "encoding": {"file": {"contentType": "application/octet-stream"}},
        }
    },
}


def post_operations() -> dict[str, dict[str, Any]]:
    """A message and a file: keyed, fenced and caused like every Worker's post."""
    post_media = operation(
        "post_media",
        (201, {**json_content("MediaPosted"), "headers": IDEMPOTENCY_STATUS}),
        [*BODY, *POST, Code.LEASE_LOST],
        security=MEMBER,
        params=[ROOM_ID, IDEMPOTENCY_KEY, WORKER_FENCE, CAUSE],
    )
    post_media["requestBody"] = MEDIA_BODY
    post_message = operation(
        "post_message",
        (201, {**json_content("EventPosted"), "headers": IDEMPOTENCY_STATUS}),
        [*BODY, *POST, Code.LEASE_LOST],
        security=MEMBER,
        params=[ROOM_ID, IDEMPOTENCY_KEY, WORKER_FENCE, CAUSE],
        body="MessageIn",
    )
    # A refusal for content is recorded under the key and replayed with its status
    # (docs/architecture.md#one-key-one-event).
    post_message["responses"]["422"]["headers"] = IDEMPOTENCY_STATUS
    post_media["responses"]["422"]["headers"] = IDEMPOTENCY_STATUS
    return {
        "/v1/rooms/{room}/messages": {"post": post_message},
        "/v1/rooms/{room}/media": {"post": post_media},
    }


def media_operations() -> dict[str, dict[str, Any]]:
    """A file's bytes: never sniffed, never inline, never run (hub/mediatypes.py)."""
    download = {
        "content": {"*/*": {"schema": {}}},
        "headers": {
            "X-Content-SHA256": {
                "required": True,
                "schema": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            },
            "X-Content-Type-Options": {
                "required": True,
                "schema": {"type": "string", "const": "nosniff"},
            },
            "Content-Disposition": {
                "required": True,
                "schema": {"type": "string", "pattern": "^attachment;"},
            },
            "Content-Security-Policy": {
                "required": True,
                "schema": {"type": "string", "pattern": "sandbox"},
            },
        },
    }
    return {
        "/v1/media/{media}": {
            "get": operation(
                "get_media",
                (200, download),
                [*AUTH, Code.MEDIA_NOT_FOUND, Code.MEDIA_REDACTED, Code.MEDIA_EXPIRED]
                + [Code.MEDIA_MISSING, Code.NOT_FOUND, *WRITE],
                security=MEMBER,
                params=[MEDIA_ID],
            )
        },
    }


def cancel_operations() -> dict[str, dict[str, Any]]:
    """A person stops an agent's Turn (docs/connect.md)."""
    return {
        "/v1/rooms/{room}/cancel": {
            "post": operation(
                "cancel_turn",
                (201, json_content("EventPosted")),
                [*BODY, *POST],
                security=MEMBER,
                params=[ROOM_ID],
                body="CancelIn",
            )
        },
    }
