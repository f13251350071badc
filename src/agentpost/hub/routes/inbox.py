"""A member's inbox: long poll, SSE, and the acknowledged cursor; and `/v1/me` (docs/api.md
"Routes", "The inbox serves what you may read")."""

from __future__ import annotations

import asyncio
import functools

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from agentpost.core.clock import now_ms
from agentpost.hub import auth, leases
from agentpost.hub.decode import read_json
from agentpost.hub.errors import json_response
from agentpost.hub.notify import inbox_key, wait
from agentpost.hub.routes.admin import member_out
from agentpost.hub.routes.events import (
    ANSWER_BYTES,
    DEFAULT_LIMIT,
    MAX_LIMIT,
    float_param,
    int_param,
    last_event_id,
)
from agentpost.hub.routes.sse import PAGE_BYTES, PAGE_EVENTS, sse_response
from agentpost.hub.schemas import AckIn
from agentpost.hub.state import Hub, hub_of
from agentpost.store import delivery, inbox, members
from agentpost.store.engine import Db, Tx
from agentpost.store.events import Page

MAX_WAIT = 60.0


def _items(rows: list[tuple[int, bytes]]) -> bytes:
    return b",".join(b'{"cursor":%d,"event":' % c + body + b"}" for c, body in rows)


async def get_inbox(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    acked = await hub.engine.read(lambda db: members.inbox_cursor(db, member.id))
    after = int_param(request, "after", acked, 0)
    limit = int_param(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    wait_s = float_param(request, "wait", 0.0, MAX_WAIT)

    def read(db: Db, recheck: bool) -> list[tuple[int, bytes]]:
        if recheck:  # a poll that waited answers its member's removal with 403
            auth.still_active(db, member)
        return inbox.page(db, member.id, after, limit, ANSWER_BYTES)

    deadline = asyncio.get_running_loop().time() + wait_s
    gauge = hub.metrics.open_streams.labels("inbox_poll")
    gauge.inc()
    try:
        recheck = False
        while True:
            woken = hub.notifier.event(inbox_key(member.id))
            rows = await hub.engine.read(functools.partial(read, recheck=recheck))
            recheck = True
            left = deadline - asyncio.get_running_loop().time()
            if rows or left <= 0 or hub.notifier.closed:
                break
            if not await wait(woken, left):
                rows = await hub.engine.read(functools.partial(read, recheck=True))
                break
    finally:
        gauge.dec()
    cursor = rows[-1][0] if rows else after
    if rows:
        await _handed_out(hub, member.id, after, cursor)
    return json_response(200, b'{"items":[' + _items(rows) + b'],"cursor":%d}' % cursor)


async def inbox_stream(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    resume = last_event_id(request)
    if resume is None:
        resume = await hub.engine.read(lambda db: members.inbox_cursor(db, member.id))
    after = resume

    async def read_page(pos: int) -> Page:
        def read(db: Db) -> Page:
            auth.still_active(db, member)  # the stream ends when its member is removed
            return inbox.page(db, member.id, pos, PAGE_EVENTS, PAGE_BYTES)

        rows = await hub.engine.read_stream(read)
        if rows:
            await _handed_out(hub, member.id, pos, rows[-1][0])
        return rows

    return sse_response(
        request,
        hub,
        member=member,
        kind="inbox",
        wake_key=inbox_key(member.id),
        after=after,
        read_page=read_page,
        frame=_inbox_frame,
    )


async def _handed_out(hub: Hub, member_id: str, after: int, upto: int) -> None:
    """Record a page handed to the member's client as `read` (docs/delivery.md): one write per
    page."""
    at = now_ms()
    await hub.engine.write(lambda tx: delivery.mark_read(tx, member_id, after, upto, at))


def _inbox_frame(cursor: int, body: bytes) -> bytes:
    return b'id: %d\nevent: inbox\ndata: {"cursor":%d,"event":' % (cursor, cursor) + body + b"}\n\n"


async def ack(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    body = await read_json(request, AckIn, hub.config.max_json_bytes)

    at = now_ms()

    def advance(tx: Tx) -> int:
        leases.check_fence(tx, member, body.fence)
        top = inbox.last_cursor(tx, member.id)
        before = members.inbox_cursor(tx, member.id)
        members.set_inbox_cursor(tx, member.id, min(body.cursor, top))
        cursor = members.inbox_cursor(tx, member.id)
        if cursor > before:
            delivery.mark_acked(tx, member.id, before, cursor, at)
        return cursor

    cursor = await hub.engine.write(advance)
    return json_response(200, b'{"cursor":%d}' % cursor)


async def me(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    out = {
        "member": member_out(member),
        "workspace": {"id": member.workspace_id, "name": member.workspace_name},
        "inbox_cursor": await hub.engine.read(lambda db: members.inbox_cursor(db, member.id)),
    }
    return json_response(200, msgspec.json.encode(out))
