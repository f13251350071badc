"""The OpenAPI 3.1 document of the hub API (docs/api.md), served at `/openapi.json`.

Request bodies are the JSON Schemas of the very msgspec Structs the routes decode, and error
statuses come from the one code→status map in `hub/errors.py`, so neither can drift; every
route must appear here (a test compares with `app.ROUTES`, and schemathesis fuzzes the rest).
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal

import msgspec

from agentpost import __version__
from agentpost.core.errors import Code
from agentpost.hub import idempotency
from agentpost.hub.errors import STATUS
from agentpost.hub.schemas import (
    AckIn,
    CancelIn,
    DeliveryOut,
    EditIn,
    Event,
    FenceIn,
    LeaseCurrent,
    LeaseIn,
    LeaseReleased,
    LeaseReply,
    LeaseTaken,
    MediaOut,
    MemberIn,
    MemberOut,
    MemberSeen,
    MessageIn,
    Name,
    OwnerIn,
    ReactionIn,
    ReadIn,
    ReadMarkerOut,
    RedactionIn,
    RetentionIn,
    RetentionReply,
    RoomIn,
    RoomOut,
    RoomPresence,
    RoomSettingsIn,
    ThreadIn,
    ThreadOut,
    WorkspaceIn,
)

# Response envelopes: documentation only, checked against the live hub by the schemathesis test.


class Workspace(msgspec.Struct):
    id: str
    name: str


class WorkspaceReply(msgspec.Struct):
    workspace: Workspace


class WorkspaceList(msgspec.Struct):
    workspaces: list[Workspace]


class MemberCreated(msgspec.Struct):
    member: MemberOut
    token: str
    workspace: str


class MemberReply(msgspec.Struct):
    member: MemberSeen


class PresenceList(msgspec.Struct):
    """The members of a workspace with their presence (docs/presence.md)."""

    workspace: str
    members: list[MemberSeen]


class MemberList(msgspec.Struct):
    workspace: str
    members: list[MemberOut]


class MemberRemoved(msgspec.Struct):
    member: MemberOut
    hard: bool


class MemberOwnerSet(msgspec.Struct):
    """The agent after `PUT …/members/{name}/owner`: its owner by name and by member id."""

    member: MemberOut
    workspace: str


class RoomReply(msgspec.Struct):
    room: RoomOut


class RoomList(msgspec.Struct):
    rooms: list[RoomOut]


class EventPosted(msgspec.Struct):
    event: Event


class MediaPosted(msgspec.Struct):
    media: MediaOut
    event: Event


class EventPage(msgspec.Struct):
    events: list[Event]


class InboxItem(msgspec.Struct):
    cursor: int
    event: Event


class InboxPage(msgspec.Struct):
    items: list[InboxItem]
    cursor: int


class InboxCursor(msgspec.Struct):
    cursor: int


class Me(msgspec.Struct):
    member: MemberOut
    workspace: Workspace
    inbox_cursor: int


class StreamTicket(msgspec.Struct):
    ticket: str
    expires_at: str
    stream_url: str


class Health(msgspec.Struct):
    status: Literal["ok"]


class RoomPostIdempotency(msgspec.Struct):
    header: str
    status_header: str
    ttl_seconds: int
    routes: list[str]


class Capabilities(msgspec.Struct):
    version: str
    room_post_idempotency: RoomPostIdempotency
    max_upload_bytes: int
    features: list[str]


class SendState(msgspec.Struct):
    """What the hub recorded for a key (docs/threads.md): `response` is the stored answer."""

    key: str
    room: str | None
    state: Literal["created", "rejected"]
    status: int
    event: Event | None
    response: dict[str, Any]
    recorded_at: str


class SendReply(msgspec.Struct):
    send: SendState


class DeliveryReply(msgspec.Struct):
    delivery: DeliveryOut


class SearchHit(msgspec.Struct):
    """`highlights`: `[start, end)` offsets in characters (code points) of `event.text`."""

    event: Event
    highlights: list[Annotated[list[int], msgspec.Meta(min_length=2, max_length=2)]]


class SearchReply(msgspec.Struct):
    """Newest first; `next_before` pages on (null: no more hits)."""

    hits: list[SearchHit]
    next_before: str | None


class ErrorDetail(msgspec.Struct):
    """`field` names the offending input; `state` and `reason` come with some codes (§3)."""

    code: Code
    message: str
    field: str | None = None
    state: str | None = None
    reason: str | None = None


class ErrorBody(msgspec.Struct):
    error: ErrorDetail


_STRUCTS: list[type[msgspec.Struct]] = [
    WorkspaceIn,
    RetentionIn,
    RetentionReply,
    MemberIn,
    RoomIn,
    RoomSettingsIn,
    MessageIn,
    AckIn,
    WorkspaceReply,
    WorkspaceList,
    MemberCreated,
    MemberRemoved,
    RoomReply,
    RoomList,
    EventPosted,
    MediaPosted,
    EventPage,
    InboxPage,
    InboxCursor,
    Me,
    Health,
    Capabilities,
    ErrorBody,
    StreamTicket,
]
_STRUCTS += [ThreadIn, ThreadOut, SendReply]  # threads (docs/threads.md)
_STRUCTS += [CancelIn, MemberReply]  # connect (docs/connect.md)
_STRUCTS += [MemberList]
_STRUCTS += [DeliveryReply]  # delivery state (docs/delivery.md)
_STRUCTS += [PresenceList]  # presence (docs/presence.md)
_STRUCTS += [SearchReply]  # search (docs/search.md)
_STRUCTS += [LeaseIn, FenceIn, LeaseTaken, LeaseReply, LeaseCurrent, LeaseReleased]  # §6
_STRUCTS += [EditIn, ReactionIn, RedactionIn]  # relations (§13)
_STRUCTS += [ReadIn, ReadMarkerOut]  # read markers (docs/api.md)
_STRUCTS += [RoomPresence]  # a room stream's presence frames (docs/api.md)
_STRUCTS += [OwnerIn, MemberOwnerSet]  # identity: an agent's owner (docs/architecture.md#identity)

JSON = "application/json"
SSE = "text/event-stream"
MEMBER = [{"memberToken": []}]
ADMIN = [{"adminToken": []}]
MEMBER_OR_ADMIN = [{"memberToken": []}, {"adminToken": []}]
MEMBER_OR_TICKET = [{"memberToken": []}, {"streamTicket": []}]
INT64_MAX = 2**63 - 1

# Refusals most routes share, by what the route does.
AUTH = [Code.UNAUTHORIZED, Code.AGENT_REMOVED, Code.MEMBER_REMOVED]
BODY = [Code.INVALID_JSON, Code.INVALID_REQUEST, Code.PAYLOAD_TOO_LARGE]
ROOM = [Code.ROOM_NOT_FOUND, Code.CHANNEL_MEMBERSHIP_REQUIRED, Code.NOT_FOUND]
WRITE = [Code.STORAGE_UNAVAILABLE]
POST = [*AUTH, *ROOM, *WRITE, Code.INVALID_IDEMPOTENCY_KEY, Code.ROOM_ARCHIVED]
POST += [Code.IDEMPOTENCY_IN_FLIGHT, Code.IDEMPOTENCY_CONFLICT, Code.COMMAND_REJECTED]

_ERROR_HEADERS = {
    401: {"WWW-Authenticate": "the auth scheme to use: `Bearer`"},
    409: {"Retry-After": "seconds to wait, with `idempotency_in_flight`"},
    429: {"Retry-After": "seconds to wait before opening another stream"},
    503: {"Retry-After": "seconds to wait before retrying"},
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(name: str) -> dict[str, Any]:
    return {"content": {JSON: {"schema": _ref(name)}}}


def _error_responses(codes: list[Code]) -> dict[str, Any]:
    """One response per status, its `code` pinned to the codes this route can return."""
    by_status: dict[int, list[str]] = {}
    for code in codes:
        by_status.setdefault(STATUS[code], [])
        if str(code) not in by_status[STATUS[code]]:
            by_status[STATUS[code]].append(str(code))
    out: dict[str, Any] = {}
    for status, names in sorted(by_status.items()):
        pinned = {"properties": {"error": {"properties": {"code": {"enum": names}}}}}
        resp: dict[str, Any] = {
            "description": "refused: " + ", ".join(f"`{n}`" for n in names),
            "content": {JSON: {"schema": {"allOf": [_ref("ErrorBody"), pinned]}}},
        }
        if status in _ERROR_HEADERS:
            resp["headers"] = {
                name: {"description": text, "schema": {"type": "string"}}
                for name, text in _ERROR_HEADERS[status].items()
            }
        out[str(status)] = resp
    return out


def _path(name: str, schema: dict[str, Any], text: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": text}


def _query(name: str, schema: dict[str, Any], text: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": text}


NAME_SCHEMA = {"type": "string", "pattern": Name.__metadata__[0].pattern}
WS = _path("ws", NAME_SCHEMA, "workspace name")
ROOM_ID = _path("room", {"type": "string"}, "room id")
MEMBER_NAME = _path("name", NAME_SCHEMA, "member name")
MEDIA_ID = _path("media", {"type": "string"}, "media id")
EVENT_ID = _path("event", {"type": "string"}, "event id")
SEQ = {"type": "integer", "minimum": 0, "maximum": INT64_MAX}
AFTER_SEQ = _query("after", SEQ, "list events with seq greater than this (0: from the start)")
LIMIT = _query(
    "limit",
    {"type": "integer", "minimum": 1, "maximum": INT64_MAX},
    "page size; default 100, capped at 1000 and at 4 MiB of events (at least one): a"
    " shorter page is not the end, page until one is empty",
)
PRESENCE = _query(
    "presence",
    {"type": "string", "enum": ["0", "1"]},
    "1: also send `presence` frames, the room's active participants with `online`,"
    " `last_seen` and `worker`, at open and whenever that changes (default 0)",
)
LAST_EVENT_ID = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "pattern": "^[0-9]*$"},
    "description": "resume after this id (SSE reconnect); wins over `after`; empty = not sent",
}
IDEMPOTENCY_KEY = {
    "name": idempotency.HEADER,
    "in": "header",
    "required": False,
    "schema": {"type": "string", "pattern": "^[\\x21-\\x7e]{1,255}$"},
    "description": "makes the post safe to retry: same key and body, same answer (§3)",
}
WORKER_FENCE = {
    "name": "Agentpost-Worker-Fence",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "pattern": "^[1-9][0-9]{0,17}$"},
    "description": 'a Worker\'s lease fence (docs/connect.md "One Worker per agent"): a post'
    " naming a fence that is no longer the agent's lease is 409 `lease_lost`",
}
CAUSE = {
    "name": "Agentpost-Cause",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
    "description": 'the event a Worker\'s post serves, its Turn\'s trigger (docs/delegation.md'
    ' "Cause"): taken only beside the Worker\'s lease fence, for an event that woke the agent',
}
IDEMPOTENCY_STATUS = {
    idempotency.STATUS_HEADER: {
        "description": "with an Idempotency-Key: `created` first, `replayed` after",
        "schema": {"type": "string", "enum": [idempotency.CREATED, idempotency.REPLAYED]},
    }
}


NO_STORE = {"Cache-Control": {"description": "`no-store`", "schema": {"type": "string"}}}
PAGE_HEADERS = {
    "Content-Security-Policy": {
        "description": "no inline script or style; nothing from elsewhere",
        "required": True,
        "schema": {"type": "string"},
    }
}


def _sse(event_name: str, data: str, id_text: str) -> dict[str, Any]:
    """An event stream; `schema` describes one event as parsed (OpenAPI 3.1 convention)."""
    return {
        "description": f"Server-sent events `{event_name}`, each with `id` {id_text}; "
        "comment lines keep the connection alive",
        "content": {
            SSE: {
                "schema": {
                    "type": "object",
                    "required": ["event", "data", "id"],
                    "properties": {
                        "event": {"const": event_name},
                        "id": {"type": "string", "pattern": "^[0-9]+$"},
                        "data": {
                            "type": "string",
                            "contentMediaType": JSON,
                            "contentSchema": _ref(data),
                        },
                    },
                }
            }
        },
    }


def _room_sse() -> dict[str, Any]:
    """The room stream: its events, and with `presence=1` also `presence` frames, which carry
    no `id` of their own (a parser gives them the last event's, if any)."""
    out = _sse("event", "Event", "= the event's `seq`")
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
                "contentSchema": _ref("RoomPresence"),
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


def _op(
    summary: str,
    ok: tuple[int, dict[str, Any]],
    errors: list[Code],
    *,
    security: list[dict[str, list[str]]] | None = None,
    params: list[dict[str, Any]] | None = None,
    body: str | None = None,
) -> dict[str, Any]:
    status, response = ok
    op: dict[str, Any] = {
        "summary": summary,
        "operationId": summary,
        "security": security if security is not None else [],
        "responses": {str(status): {"description": "ok", **response}, **_error_responses(errors)},
    }
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = {"required": True, **_json(body)}
    return op


def _operations() -> dict[str, dict[str, Any]]:
    """Every route of `app.ROUTES`, by path then method."""
    media_body = {
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
    post_media = _op(
        "post_media",
        (201, {**_json("MediaPosted"), "headers": IDEMPOTENCY_STATUS}),
        [*BODY, *POST, Code.LEASE_LOST],
        security=MEMBER,
        params=[ROOM_ID, IDEMPOTENCY_KEY, WORKER_FENCE, CAUSE],
    )
    post_media["requestBody"] = media_body
    post_message = _op(
        "post_message",
        (201, {**_json("EventPosted"), "headers": IDEMPOTENCY_STATUS}),
        [*BODY, *POST, Code.LEASE_LOST],
        security=MEMBER,
        params=[ROOM_ID, IDEMPOTENCY_KEY, WORKER_FENCE, CAUSE],
        body="MessageIn",
    )
    # A refusal for content is recorded under the key and replayed with its status (§3).
    post_message["responses"]["422"]["headers"] = IDEMPOTENCY_STATUS
    post_media["responses"]["422"]["headers"] = IDEMPOTENCY_STATUS
    participant = [ROOM_ID, MEMBER_NAME]
    room_codes = [*AUTH, *ROOM, *WRITE]
    return {
        "/healthz": {"get": _op("healthz", (200, _json("Health")), [])},
        "/metrics": {
            "get": _op(
                "metrics", (200, {"content": {"text/plain": {"schema": {"type": "string"}}}}), []
            )
        },
        "/openapi.json": {"get": _op("openapi", (200, {"content": {JSON: {"schema": {}}}}), [])},
        "/v1/capabilities": {"get": _op("capabilities", (200, _json("Capabilities")), [])},
        "/v1/admin/workspaces": {
            "post": _op(
                "create_workspace",
                (201, _json("WorkspaceReply")),
                [Code.UNAUTHORIZED, *BODY, Code.WORKSPACE_EXISTS, *WRITE],
                security=ADMIN,
                body="WorkspaceIn",
            ),
            "get": _op(
                "list_workspaces",
                (200, _json("WorkspaceList")),
                [Code.UNAUTHORIZED, *WRITE],
                security=ADMIN,
            ),
        },
        "/v1/admin/workspaces/{ws}/members": {
            "post": _op(
                "add_member",
                (201, _json("MemberCreated")),
                [Code.UNAUTHORIZED, *BODY, Code.NO_WORKSPACE, Code.NOT_FOUND]
                + [Code.MEMBER_EXISTS, *WRITE],
                security=ADMIN,
                params=[WS],
                body="MemberIn",
            ),
            "get": _op(
                "list_members",
                (200, _json("MemberList")),
                [Code.UNAUTHORIZED, Code.NO_WORKSPACE, Code.NOT_FOUND, *WRITE],
                security=ADMIN,
                params=[WS],
            ),
        },
        "/v1/admin/workspaces/{ws}/retention": {
            "get": _op(
                "get_workspace_retention",
                (200, _json("RetentionReply")),
                [Code.UNAUTHORIZED, Code.NO_WORKSPACE, Code.NOT_FOUND, *WRITE],
                security=ADMIN,
                params=[WS],
            ),
            "put": _op(
                "set_workspace_retention",
                (200, _json("RetentionReply")),
                [Code.UNAUTHORIZED, *BODY, Code.NO_WORKSPACE, Code.NOT_FOUND, *WRITE],
                security=ADMIN,
                params=[WS],
                body="RetentionIn",
            ),
        },
        "/v1/admin/workspaces/{ws}/members/{name}/token": {
            "post": _op(
                "reissue_token",
                (200, _json("MemberCreated")),
                [Code.UNAUTHORIZED, Code.NO_WORKSPACE, Code.MEMBER_NOT_FOUND, Code.NOT_FOUND]
                + [Code.AGENT_REMOVED, Code.MEMBER_REMOVED, *WRITE],
                security=ADMIN,
                params=[WS, MEMBER_NAME],
            )
        },
        "/v1/admin/workspaces/{ws}/members/{name}/owner": {
            "put": _op(
                "set_owner",
                (200, _json("MemberOwnerSet")),
                [Code.UNAUTHORIZED, *BODY, Code.NO_WORKSPACE, Code.MEMBER_NOT_FOUND]
                + [Code.NOT_FOUND, Code.AGENT_REMOVED, Code.MEMBER_REMOVED, *WRITE],
                security=ADMIN,
                params=[WS, MEMBER_NAME],
                body="OwnerIn",
            )
        },
        "/v1/admin/workspaces/{ws}/members/{name}": {
            "delete": _op(
                "remove_member",
                (200, _json("MemberRemoved")),
                [Code.UNAUTHORIZED, Code.INVALID_REQUEST, Code.NO_WORKSPACE]
                + [Code.MEMBER_NOT_FOUND, Code.NOT_FOUND, *WRITE],
                security=ADMIN,
                params=[
                    WS,
                    MEMBER_NAME,
                    _query("hard", {"type": "boolean"}, "also delete the member's tokens"),
                ],
            )
        },
        "/v1/workspaces/{ws}/rooms": {
            "post": _op(
                "create_room",
                (201, _json("RoomReply")),
                [*AUTH, *BODY, Code.NO_WORKSPACE, Code.NOT_FOUND, Code.ROOM_EXISTS, *WRITE],
                security=MEMBER_OR_ADMIN,
                params=[WS],
                body="RoomIn",
            ),
            "get": _op(
                "list_rooms",
                (200, _json("RoomList")),
                [*AUTH, Code.NO_WORKSPACE, Code.NOT_FOUND, *WRITE],
                security=MEMBER,
                params=[WS],
            ),
        },
        "/v1/rooms/{room}": {
            "get": _op(
                "get_room",
                (200, _json("RoomReply")),
                room_codes,
                security=MEMBER_OR_ADMIN,
                params=[ROOM_ID],
            ),
            "patch": _op(
                "update_room_settings",
                (200, _json("RoomReply")),
                [*room_codes, *BODY, Code.FORBIDDEN],
                security=MEMBER_OR_ADMIN,
                params=[ROOM_ID],
                body="RoomSettingsIn",
            ),
        },
        "/v1/rooms/{room}/retention": {
            "get": _op(
                "get_room_retention",
                (200, _json("RetentionReply")),
                room_codes,
                security=MEMBER_OR_ADMIN,
                params=[ROOM_ID],
            ),
            "put": _op(
                "set_room_retention",
                (200, _json("RetentionReply")),
                [*room_codes, *BODY, Code.FORBIDDEN],
                security=MEMBER_OR_ADMIN,
                params=[ROOM_ID],
                body="RetentionIn",
            ),
        },
        "/v1/rooms/{room}/participants/{name}": {
            "put": _op(
                "add_participant",
                (200, _json("RoomReply")),
                [*room_codes, Code.MEMBER_NOT_FOUND],
                security=MEMBER_OR_ADMIN,
                params=participant,
            ),
            "delete": _op(
                "remove_participant",
                (200, _json("RoomReply")),
                [*room_codes, Code.MEMBER_NOT_FOUND],
                security=MEMBER_OR_ADMIN,
                params=participant,
            ),
        },
        "/v1/rooms/{room}/archive": {
            "post": _op(
                "archive_room",
                (200, _json("RoomReply")),
                room_codes,
                security=MEMBER_OR_ADMIN,
                params=[ROOM_ID],
            )
        },
        "/v1/rooms/{room}/unarchive": {
            "post": _op(
                "unarchive_room",
                (200, _json("RoomReply")),
                room_codes,
                security=MEMBER_OR_ADMIN,
                params=[ROOM_ID],
            )
        },
        "/v1/rooms/{room}/messages": {"post": post_message},
        "/v1/rooms/{room}/media": {"post": post_media},
        "/v1/rooms/{room}/events": {
            "get": _op(
                "list_events",
                (200, _json("EventPage")),
                [*room_codes, Code.INVALID_REQUEST],
                security=MEMBER,
                params=[ROOM_ID, AFTER_SEQ, LIMIT],
            )
        },
        "/v1/rooms/{room}/stream": {
            "get": _op(
                "room_stream",
                (200, _room_sse()),
                [*room_codes, Code.INVALID_REQUEST, Code.TOO_MANY_STREAMS],
                security=MEMBER_OR_TICKET,
                params=[ROOM_ID, AFTER_SEQ, LAST_EVENT_ID, PRESENCE],
            )
        },
        "/v1/rooms/{room}/read": {
            "post": _op(
                "mark_room_read",
                (200, _json("ReadMarkerOut")),
                [*room_codes, *BODY],
                security=MEMBER,
                params=[ROOM_ID],
                body="ReadIn",
            )
        },
        "/v1/rooms/{room}/stream-ticket": {
            "post": _op(
                "stream_ticket",
                (201, {**_json("StreamTicket"), "headers": NO_STORE}),
                room_codes,
                security=MEMBER,
                params=[ROOM_ID],
            )
        },
        "/v1/events/{event}": {
            "get": _op(
                "get_event",
                (200, _json("EventPosted")),
                [*AUTH, Code.EVENT_NOT_FOUND, Code.NOT_FOUND],
                security=MEMBER,
                params=[EVENT_ID],
            )
        },
        "/v1/media/{media}": {
            "get": _op(
                "get_media",
                (
                    200,
                    {
                        "content": {"*/*": {"schema": {}}},
                        "headers": {
                            "X-Content-SHA256": {
                                "required": True,
                                "schema": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                            },
                            # Never sniffed, never inline, never run (hub/mediatypes.py).
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
                    },
                ),
                [*AUTH, Code.MEDIA_NOT_FOUND, Code.MEDIA_REDACTED, Code.MEDIA_EXPIRED, Code.MEDIA_MISSING, Code.NOT_FOUND, *WRITE],
                security=MEMBER,
                params=[MEDIA_ID],
            )
        },
        "/v1/inbox": {
            "get": _op(
                "get_inbox",
                (200, _json("InboxPage")),
                [*AUTH, Code.INVALID_REQUEST, *WRITE],
                security=MEMBER,
                params=[
                    _query("after", SEQ, "inbox cursor to list after; default: the acked cursor"),
                    LIMIT,
                    _query(
                        "wait",
                        {"type": "number", "minimum": 0},
                        "long poll: seconds to wait for an item when there is none (capped at"
                        " 60); a member removed meanwhile is answered 403 at once",
                    ),
                ],
            )
        },
        "/v1/inbox/stream": {
            "get": _op(
                "inbox_stream",
                (200, _sse("inbox", "InboxItem", "= the inbox cursor")),
                [*AUTH, Code.INVALID_REQUEST, *WRITE, Code.TOO_MANY_STREAMS],
                security=MEMBER,
                params=[LAST_EVENT_ID],
            )
        },
        "/v1/inbox/ack": {
            "post": _op(
                "ack_inbox",
                (200, _json("InboxCursor")),
                [*AUTH, *BODY, *WRITE, Code.LEASE_LOST],
                security=MEMBER,
                body="AckIn",
            )
        },
        "/v1/me": {"get": _op("me", (200, _json("Me")), [*AUTH, *WRITE], security=MEMBER)},
        "/v1/workspaces/{ws}/members": {
            "get": _op(
                "workspace_members",
                (200, _json("PresenceList")),
                [*AUTH, Code.NO_WORKSPACE, *WRITE],
                security=MEMBER,
                params=[WS],
            )
        },
        "/v1/workspaces/{ws}/members/{name}": {
            "get": _op(
                "get_member",
                (200, _json("MemberReply")),
                [*AUTH, Code.NO_WORKSPACE, Code.MEMBER_NOT_FOUND, Code.NOT_FOUND, *WRITE],
                security=MEMBER,
                params=[WS, MEMBER_NAME],
            )
        },
        "/v1/rooms/{room}/cancel": {
            "post": _op(
                "cancel_turn",
                (201, _json("EventPosted")),
                [*BODY, *POST],
                security=MEMBER,
                params=[ROOM_ID],
                body="CancelIn",
            )
        },
        **_thread_operations(),
        **_relation_operations(),
        **_lease_operations(),
        **_page_operations(),
        **_export_operations(),
    }


def _export_operations() -> dict[str, dict[str, Any]]:
    """Exports (docs/api.md "Export"): streamed JSONL or Markdown, as an attachment."""
    disposition = {
        "Content-Disposition": {
            "required": True,
            "schema": {"type": "string", "pattern": "^attachment;"},
        }
    }
    jsonl = {"application/x-ndjson": {"schema": {"type": "string"}}}
    room_export = {"content": {**jsonl, "text/markdown": {"schema": {"type": "string"}}}}
    params = [
        ROOM_ID,
        _query(
            "format",
            {"type": "string", "enum": ["jsonl", "md"]},
            "jsonl (default): a header line, each event as the events API serves it, the"
            " receipts of events that asked agents, an end line; md: a Markdown transcript",
        ),
        _query(
            "files",
            {"type": "string", "enum": ["paths", "embed"]},
            "paths (default): each attachment gains `path` (files/<media id>-<name>); embed"
            " (jsonl only): `content_base64`, refused (413) when the room's files total more"
            " than 4 × the hub's max upload bytes",
        ),
    ]
    download = {
        "content": {"*/*": {"schema": {}}},
        "headers": {
            **disposition,
            "X-Content-SHA256": {
                "required": True,
                "schema": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            },
        },
    }
    return {
        "/v1/rooms/{room}/export": {
            "get": _op(
                "export_room",
                (200, {**room_export, "headers": disposition}),
                [*AUTH, *ROOM, *WRITE, Code.INVALID_REQUEST, Code.PAYLOAD_TOO_LARGE]
                + [Code.TOO_MANY_STREAMS],
                security=MEMBER,
                params=params,
            )
        },
        "/v1/admin/workspaces/{ws}/export": {
            "get": _op(
                "export_workspace",
                (200, {"content": jsonl, "headers": disposition}),
                [Code.UNAUTHORIZED, Code.NO_WORKSPACE, Code.NOT_FOUND, Code.TOO_MANY_STREAMS]
                + WRITE,
                security=ADMIN,
                params=[WS],
            )
        },
        "/v1/admin/workspaces/{ws}/media/{media}": {
            "get": _op(
                "export_workspace_media",
                (200, download),
                [Code.UNAUTHORIZED, Code.NO_WORKSPACE, Code.MEDIA_NOT_FOUND, Code.NOT_FOUND]
                + [Code.MEDIA_REDACTED, Code.MEDIA_EXPIRED, Code.MEDIA_MISSING, *WRITE],
                security=ADMIN,
                params=[WS, MEDIA_ID],
            )
        },
    }


def _relation_operations() -> dict[str, dict[str, Any]]:
    """Edits, reactions and redactions (docs/api.md "Relations"): keyed and gated as posts."""
    refusals = [*BODY, *POST, Code.LEASE_LOST, Code.EVENT_NOT_FOUND, Code.EVENT_REDACTED]
    refusals += [Code.INVALID_RELATION_TARGET]
    params = [ROOM_ID, EVENT_ID, IDEMPOTENCY_KEY, WORKER_FENCE]
    out: dict[str, dict[str, Any]] = {}
    for kind, name, body, own in [
        ("edits", "edit_event", "EditIn", [Code.NOT_EVENT_SENDER]),
        ("reactions", "react_to_event", "ReactionIn", [Code.INVALID_EMOJI, Code.REACTION_LIMIT]),
        ("redactions", "redact_event", "RedactionIn", [Code.NOT_EVENT_SENDER]),
    ]:
        op = _op(
            name,
            (201, {**_json("EventPosted"), "headers": IDEMPOTENCY_STATUS}),
            [*refusals, *own],
            security=MEMBER,
            params=params,
            body=body,
        )
        # A refusal for content is recorded under the key and replayed with its status (§3).
        op["responses"]["422"]["headers"] = IDEMPOTENCY_STATUS
        if kind == "redactions":
            op["requestBody"]["required"] = False  # no body: no reason
        out[f"/v1/rooms/{{room}}/events/{{event}}/{kind}"] = {"post": op}
    return out


def _lease_operations() -> dict[str, dict[str, Any]]:
    """One Worker per agent member (docs/connect.md "One Worker")."""
    lease_refusals = [*AUTH, *BODY, *WRITE, Code.LEASE_LOST]
    return {
        "/v1/worker/lease": {
            "post": _op(
                "take_worker_lease",
                (200, _json("LeaseTaken")),
                [*AUTH, *BODY, *WRITE, Code.FORBIDDEN, Code.LEASE_HELD],
                security=MEMBER,
                body="LeaseIn",
            ),
            "get": _op(
                "worker_lease", (200, _json("LeaseCurrent")), [*AUTH, *WRITE], security=MEMBER
            ),
        },
        "/v1/worker/lease/renew": {
            "post": _op(
                "renew_worker_lease",
                (200, _json("LeaseReply")),
                [*lease_refusals, Code.FORBIDDEN],
                security=MEMBER,
                body="FenceIn",
            )
        },
        "/v1/worker/lease/release": {
            "post": _op(
                "release_worker_lease",
                (200, _json("LeaseReleased")),
                lease_refusals,
                security=MEMBER,
                body="FenceIn",
            )
        },
    }


def _page_operations() -> dict[str, dict[str, Any]]:
    """The web page (docs/web.md): not API, but served by the same hub."""
    html = {"content": {"text/html": {"schema": {"type": "string"}}}, "headers": PAGE_HEADERS}
    asset = {
        "content": {
            "text/javascript": {"schema": {"type": "string"}},
            "text/css": {"schema": {"type": "string"}},
            "image/svg+xml": {"schema": {"type": "string"}},
        },
        "headers": PAGE_HEADERS,
    }
    name = _path("asset", {"type": "string"}, "a file of the page, e.g. `app.js`")
    return {
        "/": {"get": _op("web_page", (200, html), [])},
        "/web/{asset}": {"get": _op("web_asset", (200, asset), [Code.NOT_FOUND], params=[name])},
    }


def _thread_operations() -> dict[str, dict[str, Any]]:
    """Threads (docs/threads.md): ensure the one thread; a key's send state."""
    ensure = _op(
        "ensure_thread",
        (201, _json("ThreadOut")),
        [*AUTH, *BODY, Code.NO_WORKSPACE, Code.NOT_FOUND, Code.THREAD_CONFLICT, *WRITE],
        security=MEMBER,
        params=[WS],
        body="ThreadIn",
    )
    ensure["responses"]["200"] = {"description": "it was there already", **_json("ThreadOut")}
    key = {
        **_query("key", IDEMPOTENCY_KEY["schema"], "the Idempotency-Key the send used"),
        "required": True,
    }
    search = [
        {
            **_query(
                "q",
                {"type": "string", "minLength": 1, "maxLength": 1000},
                'words (all must match), "a phrase", word* (a prefix), -word or -"a phrase"'
                " (excluded); at most 1000 characters and 16 terms",
            ),
            "required": True,
        },
        _query("room", {"type": "string"}, "only this room (one you take part in)"),
        _query("sender", {"type": "string"}, "only events this member sent"),
        _query("before", {"type": "string"}, "the `next_before` of the previous page"),
        _query(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": INT64_MAX},
            "default 20, at most 100",
        ),
    ]
    return {
        "/v1/search": {
            "get": _op(
                "search",
                (200, _json("SearchReply")),
                [*AUTH, Code.SEARCH_QUERY_INVALID, Code.INVALID_REQUEST, Code.ROOM_NOT_FOUND]
                + [Code.CHANNEL_MEMBERSHIP_REQUIRED],
                security=MEMBER,
                params=search,
            )
        },
        "/v1/workspaces/{ws}/threads/ensure": {"post": ensure},
        "/v1/rooms/{room}/events/{event}/delivery": {
            "get": _op(
                "delivery_state",
                (200, _json("DeliveryReply")),
                [*AUTH, Code.EVENT_NOT_FOUND],
                security=MEMBER,
                params=[ROOM_ID, EVENT_ID],
            )
        },
        "/v1/events/{event}/delivery": {
            "get": _op(
                "delivery_state_by_event",
                (200, _json("DeliveryReply")),
                [*AUTH, Code.EVENT_NOT_FOUND],
                security=MEMBER,
                params=[EVENT_ID],
            )
        },
        "/v1/rooms/{room}/sends": {
            "get": _op(
                "send_state",
                (200, _json("SendReply")),
                [*AUTH, Code.INVALID_REQUEST, Code.INVALID_IDEMPOTENCY_KEY]
                + [Code.SEND_NOT_FOUND, Code.NOT_FOUND, *WRITE],
                security=MEMBER,
                params=[ROOM_ID, key],
            )
        },
    }


@functools.cache
def _document() -> bytes:
    _, components = msgspec.json.schema_components(
        [*_STRUCTS, InboxItem], ref_template="#/components/schemas/{name}"
    )
    doc = {
        "openapi": "3.1.0",
        "info": {
            "title": "agentpost hub",
            "version": __version__,
            "description": "JSON everywhere; errors are "
            '`{"error": {"code", "message", ...}}` (docs/api.md).',
        },
        "paths": _operations(),
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
