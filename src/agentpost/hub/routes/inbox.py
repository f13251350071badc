"""A member's inbox: long poll, SSE, and the acknowledged cursor; and `/v1/me` (§2, §3)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from agentpost.hub import auth
from agentpost.hub.decode import read_json
from agentpost.hub.errors import json_response
from agentpost.hub.notify import inbox_key, wait
from agentpost.hub.routes.admin import member_out
from agentpost.hub.routes.events import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    float_param,
    int_param,
    last_event_id,
)
from agentpost.hub.schemas import AckIn
from agentpost.hub.state import hub_of
from agentpost.store import inbox, members
from agentpost.store.engine import Tx

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
    loop_deadline = None
    gauge = hub.metrics.open_streams.labels("inbox_poll")
    gauge.inc()
    try:
        while True:
            woken = hub.notifier.event(inbox_key(member.id))
            rows = await hub.engine.read(lambda db: inbox.page(db, member.id, after, limit))
            if rows or wait_s <= 0:
                break
            now = asyncio.get_running_loop().time()
            loop_deadline = loop_deadline or now + wait_s
            if now >= loop_deadline or not await wait(woken, loop_deadline - now):
                rows = await hub.engine.read(lambda db: inbox.page(db, member.id, after, limit))
                break
    finally:
        gauge.dec()
    cursor = rows[-1][0] if rows else after
    return json_response(200, b'{"items":[' + _items(rows) + b'],"cursor":%d}' % cursor)


async def inbox_stream(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    resume = last_event_id(request)
    if resume is None:
        resume = await hub.engine.read(lambda db: members.inbox_cursor(db, member.id))
    after = resume
    keepalive = hub.config.sse_keepalive_seconds

    async def frames() -> AsyncIterator[bytes]:
        nonlocal after
        gauge = hub.metrics.open_streams.labels("inbox")
        gauge.inc()
        try:
            yield b": stream open\n\n"
            while True:
                woken = hub.notifier.event(inbox_key(member.id))
                rows = await hub.engine.read(lambda db, a=after: inbox.page(db, member.id, a, 200))
                if rows:
                    yield b"".join(
                        b'id: %d\nevent: inbox\ndata: {"cursor":%d,"event":' % (cursor, cursor)
                        + body
                        + b"}\n\n"
                        for cursor, body in rows
                    )
                    after = rows[-1][0]
                    await asyncio.sleep(0)  # as in the room stream: serve others, notice hang-ups
                    if await request.is_disconnected():
                        return
                if len(rows) == 200:
                    continue
                if not await wait(woken, keepalive):
                    yield b": keep-alive\n\n"
        finally:
            gauge.dec()

    return StreamingResponse(
        frames(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def ack(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    body = await read_json(request, AckIn, hub.config.max_json_bytes)

    def advance(tx: Tx) -> int:
        top = inbox.last_cursor(tx, member.id)
        members.set_inbox_cursor(tx, member.id, min(body.cursor, top))
        return members.inbox_cursor(tx, member.id)

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
