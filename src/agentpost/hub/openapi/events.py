"""A room's events (hub/routes/events.py): the page, the stream and its ticket, one event;
and the room's read marker (hub/routes/rooms.py), which names an event."""

from __future__ import annotations

from typing import Any

from agentpost.core.errors import Code
from agentpost.hub.openapi.common import (
    AFTER_SEQ,
    AUTH,
    BODY,
    EVENT_ID,
    JSON,
    LAST_EVENT_ID,
    LIMIT,
    MEMBER,
    MEMBER_OR_TICKET,
    ROOM,
    ROOM_ID,
    SSE,
    WRITE,
    json_content,
    operation,
    query_param,
    ref,
    sse,
)

PRESENCE = query_param(
    "presence",
    {"type": "string", "enum": ["0", "1"]},
    "1: also send `presence` frames, the room's active participants with `online`,"
    " `last_seen` and `worker`, at open and whenever that changes (default 0)",
)
NO_STORE = {"Cache-Control": {"description": "`no-store`", "schema": {"type": "string"}}}


def _room_sse() -> dict[str, Any]:
    """The room stream: its events, and with `presence=1` also `presence` frames, which carry
    no `id` of their own (a parser gives them the last event's, if any)."""
    out = sse("event", "Event", "= the event's `seq`")
    events = out["content"][SSE]["schema"]
    presence = {
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "event": {"const": "presence"},
            "id": events["properties"]["id"],
            "data": {
                "type": "string",
                "contentMediaType": JSON,
                "contentSchema": ref("RoomPresence"),
            },
        },
    }
    out["content"][SSE]["schema"] = {"oneOf": [events, presence]}
    out["description"] = (
        "Server-sent events `event`, each with `id` = the event's `seq`; with `presence=1`"
        " also `presence` frames (no `id` line): the room's active participants, at open and"
        " whenever that changes; comment lines keep the connection alive"
    )
    return out


def operations() -> dict[str, dict[str, Any]]:
    room_codes = [*AUTH, *ROOM, *WRITE]
    return {
        "/v1/rooms/{room}/events": {
            "get": operation(
                "list_events",
                (200, json_content("EventPage")),
                [*room_codes, Code.INVALID_REQUEST],
                security=MEMBER,
                params=[ROOM_ID, AFTER_SEQ, LIMIT],
            )
        },
        "/v1/rooms/{room}/stream": {
            "get": operation(
                "room_stream",
                (200, _room_sse()),
                [*room_codes, Code.INVALID_REQUEST, Code.TOO_MANY_STREAMS],
                security=MEMBER_OR_TICKET,
                params=[ROOM_ID, AFTER_SEQ, LAST_EVENT_ID, PRESENCE],
            )
        },
        "/v1/rooms/{room}/read": {
            "post": operation(
                "mark_room_read",
                (200, json_content("ReadMarkerOut")),
                [*room_codes, *BODY],
                security=MEMBER,
                params=[ROOM_ID],
                body="ReadIn",
            )
        },
        "/v1/rooms/{room}/stream-ticket": {
            "post": operation(
                "stream_ticket",
                (201, {**json_content("StreamTicket"), "headers": NO_STORE}),
                room_codes,
                security=MEMBER,
                params=[ROOM_ID],
            )
        },
        "/v1/events/{event}": {
            "get": operation(
                "get_event",
                (200, json_content("EventPosted")),
                [*AUTH, Code.EVENT_NOT_FOUND, Code.NOT_FOUND],
                security=MEMBER,
                params=[EVENT_ID],
            )
        },
    }
