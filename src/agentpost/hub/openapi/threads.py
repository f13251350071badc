"""Threads (hub/routes/threads.py, docs/threads.md): ensure the one thread; a key's send
state; and what became of a post, its delivery (hub/routes/delivery.py, docs/delivery.md)."""

from __future__ import annotations

from typing import Any

from agentpost.core.errors import Code
from agentpost.hub.openapi.common import (
    AUTH,
    BODY,
    EVENT_ID,
    IDEMPOTENCY_KEY,
    MEMBER,
    ROOM_ID,
    WRITE,
    WS,
    json_content,
    operation,
    query_param,
)


def operations() -> dict[str, dict[str, Any]]:
    ensure = operation(
        "ensure_thread",
        (201, json_content("ThreadOut")),
        [*AUTH, *BODY, Code.NO_WORKSPACE, Code.NOT_FOUND, Code.THREAD_CONFLICT, *WRITE],
        security=MEMBER,
        params=[WS],
        body="ThreadIn",
    )
    ensure["responses"]["200"] = {
        "description": "it was there already",
        **json_content("ThreadOut"),
    }
    key = {
        **query_param("key", IDEMPOTENCY_KEY["schema"], "the Idempotency-Key the send used"),
        "required": True,
    }
    return {
        "/v1/workspaces/{ws}/threads/ensure": {"post": ensure},
        "/v1/rooms/{room}/events/{event}/delivery": {
            "get": operation(
                "delivery_state",
                (200, json_content("DeliveryReply")),
                [*AUTH, Code.EVENT_NOT_FOUND],
                security=MEMBER,
                params=[ROOM_ID, EVENT_ID],
            )
        },
        "/v1/events/{event}/delivery": {
            "get": operation(
                "delivery_state_by_event",
                (200, json_content("DeliveryReply")),
                [*AUTH, Code.EVENT_NOT_FOUND],
                security=MEMBER,
                params=[EVENT_ID],
            )
        },
        "/v1/rooms/{room}/sends": {
            "get": operation(
                "send_state",
                (200, json_content("SendReply")),
                [*AUTH, Code.INVALID_REQUEST, Code.INVALID_IDEMPOTENCY_KEY]
                + [Code.SEND_NOT_FOUND, Code.NOT_FOUND, *WRITE],
                security=MEMBER,
                params=[ROOM_ID, key],
            )
        },
    }
