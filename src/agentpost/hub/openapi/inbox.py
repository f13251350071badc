"""A member's inbox (hub/routes/inbox.py): the page, its long poll and stream, the ack, and
`/v1/me`, the member with its acked cursor."""

from __future__ import annotations

from typing import Any

from agentpost.core.errors import Code
from agentpost.hub.openapi.common import (
    AUTH,
    BODY,
    LAST_EVENT_ID,
    LIMIT,
    MEMBER,
    SEQ,
    WRITE,
    json_content,
    operation,
    query_param,
    sse,
)


def operations() -> dict[str, dict[str, Any]]:
    return {
        "/v1/inbox": {
            "get": operation(
                "get_inbox",
                (200, json_content("InboxPage")),
                [*AUTH, Code.INVALID_REQUEST, *WRITE],
                security=MEMBER,
                params=[
                    query_param(
                        "after", SEQ, "inbox cursor to list after; default: the acked cursor"
                    ),
                    LIMIT,
                    query_param(
                        "wait",
                        {"type": "number", "minimum": 0},
                        "long poll: seconds to wait for an item when there is none (capped at"
                        " 60); a member removed meanwhile is answered 403 at once",
                    ),
                ],
            )
        },
        "/v1/inbox/stream": {
            "get": operation(
                "inbox_stream",
                (200, sse("inbox", "InboxItem", "= the inbox cursor")),
                [*AUTH, Code.INVALID_REQUEST, *WRITE, Code.TOO_MANY_STREAMS],
                security=MEMBER,
                params=[LAST_EVENT_ID],
            )
        },
        "/v1/inbox/ack": {
            "post": operation(
                "ack_inbox",
                (200, json_content("InboxCursor")),
                [*AUTH, *BODY, *WRITE, Code.LEASE_LOST],
                security=MEMBER,
                body="AckIn",
            )
        },
        "/v1/me": {
            "get": operation("me", (200, json_content("Me")), [*AUTH, *WRITE], security=MEMBER)
        },
    }
