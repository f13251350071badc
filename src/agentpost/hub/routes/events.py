"""Reading a room: pages of events, the SSE stream (resumable by `Last-Event-ID`, with the
room's presence frames on request), and the stream tickets a browser opens that stream
with (docs/api.md "Streams and long polls", "Stream tickets (for browsers)")."""

from __future__ import annotations

import logging

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from agentpost.core.clock import rfc3339
from agentpost.core.errors import Code, RequestError
from agentpost.core.ids import token_hash
from agentpost.hub import auth, tickets
from agentpost.hub.errors import json_response
from agentpost.hub.notify import room_key
from agentpost.hub.routes.room_presence import RoomPresenceFrames, wanted
from agentpost.hub.routes.rooms import visible_room
from agentpost.hub.routes.sse import PAGE_BYTES, PAGE_EVENTS, sse_response
from agentpost.hub.state import Hub, hub_of
from agentpost.store import events, rooms
from agentpost.store.engine import Db
from agentpost.store.events import Page
from agentpost.store.models import Member

log = logging.getLogger("agentpost.hub")

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
# A page answered at once (events, the inbox) holds at most this many bytes of bodies
# (always at least one event): a client pages until a page comes back empty (docs/api.md
# "Streams and long polls").
ANSWER_BYTES = 4 * 1024 * 1024


# Seqs and cursors are SQLite INTEGERs: a bigger number is a bad request, not a crash.
MAX_INT = 2**63 - 1


def parse_int(raw: str, name: str, low: int) -> int:
    """`raw` as an integer in [low, MAX_INT]; 400 `invalid_request` naming `name` otherwise."""
    try:
        value = int(raw)
    except ValueError:
        raise RequestError(Code.INVALID_REQUEST, f"{name} must be an integer", field=name) from None
    if value < low:
        raise RequestError(Code.INVALID_REQUEST, f"{name} must be at least {low}", field=name)
    if value > MAX_INT:
        raise RequestError(Code.INVALID_REQUEST, f"{name} must be at most {MAX_INT}", field=name)
    return value


def last_event_id(request: Request) -> int | None:
    """The SSE `Last-Event-ID` header as a number, if sent (our ids are ASCII digits)."""
    raw = request.headers.get("last-event-id")
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise RequestError(
            Code.INVALID_REQUEST, "Last-Event-ID must be a number", field="Last-Event-ID"
        )
    return parse_int(raw, "Last-Event-ID", 0)


def int_param(request: Request, name: str, default: int, low: int, high: int | None = None) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    value = parse_int(raw, name, low)
    return min(value, high) if high is not None else value


def float_param(request: Request, name: str, default: float, high: float) -> float:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise RequestError(Code.INVALID_REQUEST, f"{name} must be a number", field=name) from None
    if not 0 <= value < float("inf"):
        raise RequestError(Code.INVALID_REQUEST, f"{name} must be 0 or more", field=name)
    return min(value, high)


async def _page(
    hub: Hub,
    member: Member,
    room_id: str,
    after: int,
    limit: int,
    max_bytes: int | None = None,
    stream: bool = False,
) -> Page:
    def read(db: Db) -> Page:
        if stream:  # a stream outlives its auth check: re-check the member on each page
            auth.still_active(db, member)
        visible_room(db, room_id, member)
        return events.page(db, room_id, after, limit, max_bytes)

    return await (hub.engine.read_stream if stream else hub.engine.read)(read)


async def list_events(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    after = int_param(request, "after", 0, 0)
    limit = int_param(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    rows = await _page(hub, member, request.path_params["room"], after, limit, ANSWER_BYTES)
    return json_response(200, b'{"events":[' + b",".join(body for _, body in rows) + b"]}")


async def get_event(request: Request) -> Response:
    """One event by id, for a participant of its room; any other caller learns nothing
    (404 `event_not_found`, as for an id that does not exist)."""
    hub = hub_of(request)
    member = await auth.member(request, hub)
    event_id = request.path_params["event"]
    missing = RequestError(Code.EVENT_NOT_FOUND, f"no event {event_id!r} in a room of yours")

    def read(db: Db) -> bytes:
        found = events.by_id(db, event_id)
        if found is None:
            raise missing
        room_id, _, body = found
        room = rooms.room_by_id(db, room_id)
        if room is None or room.workspace_id != member.workspace_id:
            raise missing
        if not rooms.is_participant(db, room.id, member.id):
            raise missing
        return body

    body = await hub.engine.read(read)
    return json_response(200, b'{"event":' + body + b"}")


def sse_frame(ident: int, data: bytes) -> bytes:
    return b"id: %d\nevent: event\ndata: " % ident + data + b"\n\n"


async def stream_ticket(request: Request) -> Response:
    """`POST /v1/rooms/{room}/stream-ticket`: a short-lived ticket for this room's stream."""
    hub = hub_of(request)
    member = await auth.member(request, hub)
    room_id = request.path_params["room"]
    await _page(hub, member, room_id, 0, 1)  # only a participant gets one
    ticket, expires_ms = tickets.issue(
        member, token_hash(auth.bearer(request)), room_id, hub.config.stream_ticket_seconds
    )
    out = {
        "ticket": ticket,
        "expires_at": rfc3339(expires_ms),
        "stream_url": f"/v1/rooms/{room_id}/stream?{tickets.QUERY_PARAM}={ticket}",
    }
    return json_response(201, msgspec.json.encode(out), {"Cache-Control": "no-store"})


async def stream(request: Request) -> Response:
    hub = hub_of(request)
    room_id = request.path_params["room"]
    ticket = request.query_params.get(tickets.QUERY_PARAM)
    if ticket is None:
        member = await auth.member(request, hub)
    else:
        member = await hub.engine.read(lambda db: tickets.redeem(db, ticket, room_id))
    after = int_param(request, "after", 0, 0)  # checked even when Last-Event-ID wins
    with_presence = wanted(request)
    resume = last_event_id(request)
    if resume is not None:
        after = resume
    await _page(hub, member, room_id, after, 1)  # refuse now, not inside the stream

    return sse_response(
        request,
        hub,
        member=member,
        kind="room",
        wake_key=room_key(room_id),
        after=after,
        read_page=lambda pos: _page(
            hub, member, room_id, pos, PAGE_EVENTS, PAGE_BYTES, stream=True
        ),
        frame=sse_frame,
        side=RoomPresenceFrames(hub, room_id) if with_presence else None,
    )
