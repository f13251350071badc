"""What every part of the OpenAPI document shares: the response envelopes (documentation only,
checked against the live hub by the schemathesis test), the components' Structs, the refusals
most routes share, the parameters, and the builders of an operation, its error responses and
an event stream."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

import msgspec

from agentpost.core.errors import Code
from agentpost.hub import idempotency
from agentpost.hub.errors import STATUS
from agentpost.hub.schemas import (
    AckIn,
    CancelIn,
    CheckIn,
    ConflictList,
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
    RenewIn,
    ReservationList,
    ReservationReply,
    ReserveIn,
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
    """`field` names the offending input; `state` and `reason` come with some codes
    (docs/api.md "Error codes")."""

    code: Code
    message: str
    field: str | None = None
    state: str | None = None
    reason: str | None = None


class ErrorBody(msgspec.Struct):
    error: ErrorDetail


STRUCTS: list[type[msgspec.Struct]] = [
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
STRUCTS += [ThreadIn, ThreadOut, SendReply]  # threads (docs/threads.md)
STRUCTS += [CancelIn, MemberReply]  # connect (docs/connect.md)
STRUCTS += [MemberList]
STRUCTS += [DeliveryReply]  # delivery state (docs/delivery.md)
STRUCTS += [PresenceList]  # presence (docs/presence.md)
STRUCTS += [SearchReply]  # search (docs/search.md)
# The Worker lease (docs/architecture.md#one-worker-per-agent).
STRUCTS += [LeaseIn, FenceIn, LeaseTaken, LeaseReply, LeaseCurrent, LeaseReleased]
STRUCTS += [EditIn, ReactionIn, RedactionIn]  # relations (docs/architecture.md#relations)
STRUCTS += [ReadIn, ReadMarkerOut]  # read markers (docs/api.md)
STRUCTS += [RoomPresence]  # a room stream's presence frames (docs/api.md)
STRUCTS += [OwnerIn, MemberOwnerSet]  # identity: an agent's owner (docs/architecture.md#identity)
# File reservations (docs/architecture.md#leases).
STRUCTS += [ReserveIn, RenewIn, CheckIn, ReservationReply, ReservationList, ConflictList]

JSON = "application/json"
SSE = "text/event-stream"
Security = list[dict[str, list[str]]]
MEMBER: Security = [{"memberToken": []}]
ADMIN: Security = [{"adminToken": []}]
MEMBER_OR_ADMIN: Security = [{"memberToken": []}, {"adminToken": []}]
MEMBER_OR_TICKET: Security = [{"memberToken": []}, {"streamTicket": []}]
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


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def json_content(name: str) -> dict[str, Any]:
    return {"content": {JSON: {"schema": ref(name)}}}


def error_responses(codes: list[Code]) -> dict[str, Any]:
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
            "content": {JSON: {"schema": {"allOf": [ref("ErrorBody"), pinned]}}},
        }
        if status in _ERROR_HEADERS:
            resp["headers"] = {
                name: {"description": text, "schema": {"type": "string"}}
                for name, text in _ERROR_HEADERS[status].items()
            }
        out[str(status)] = resp
    return out


def path_param(name: str, schema: dict[str, Any], text: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": schema, "description": text}


def query_param(name: str, schema: dict[str, Any], text: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": text}


NAME_SCHEMA = {"type": "string", "pattern": get_args(Name)[1].pattern}
WS = path_param("ws", NAME_SCHEMA, "workspace name")
ROOM_ID = path_param("room", {"type": "string"}, "room id")
MEMBER_NAME = path_param("name", NAME_SCHEMA, "member name")
MEDIA_ID = path_param("media", {"type": "string"}, "media id")
EVENT_ID = path_param("event", {"type": "string"}, "event id")
SEQ = {"type": "integer", "minimum": 0, "maximum": INT64_MAX}
AFTER_SEQ = query_param("after", SEQ, "list events with seq greater than this (0: from the start)")
LIMIT = query_param(
    "limit",
    {"type": "integer", "minimum": 1, "maximum": INT64_MAX},
    "page size; default 100, capped at 1000 and at 4 MiB of events (at least one): a"
    " shorter page is not the end, page until one is empty",
)
LAST_EVENT_ID = {
    "name": "Last-Event-ID",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "pattern": "^[0-9]*$"},
    "description": "resume after this id (SSE reconnect); wins over `after`; empty = not sent",
}
IDEMPOTENCY_KEY: dict[str, Any] = {
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
IDEMPOTENCY_STATUS = {
    idempotency.STATUS_HEADER: {
        "description": "with an Idempotency-Key: `created` first, `replayed` after",
        "schema": {"type": "string", "enum": [idempotency.CREATED, idempotency.REPLAYED]},
    }
}


def sse(event_name: str, data: str, id_text: str) -> dict[str, Any]:
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
                            "contentSchema": ref(data),
                        },
                    },
                }
            }
        },
    }


def operation(
    summary: str,
    ok: tuple[int, dict[str, Any]],
    errors: list[Code],
    *,
    security: Security | None = None,
    params: list[dict[str, Any]] | None = None,
    body: str | None = None,
) -> dict[str, Any]:
    """One operation: its `ok` (status, response), one error response per status of `errors`,
    `security` (none: open), `params`, and `body` by its component's name."""
    status, response = ok
    op: dict[str, Any] = {
        "summary": summary,
        "operationId": summary,
        "security": security if security is not None else [],
        "responses": {str(status): {"description": "ok", **response}, **error_responses(errors)},
    }
    if params:
        op["parameters"] = params
    if body is not None:
        op["requestBody"] = {"required": True, **json_content(body)}
    return op
