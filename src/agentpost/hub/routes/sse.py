"""One server-sent-events loop for the room stream and the inbox stream (DESIGN.md §3).

Data always comes from the store, after the position the reader has; a wake-up only says
"look again". A page is written at once, then the loop yields so other requests run and a
reader that hung up far behind is noticed. Silence is broken by `: keep-alive` comments
so proxies keep the connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.requests import Request
from starlette.responses import StreamingResponse

from agentpost.core.errors import AgentpostError
from agentpost.hub.notify import wait
from agentpost.hub.state import Hub

log = logging.getLogger("agentpost.hub")

Page = list[tuple[int, bytes]]


def sse_response(
    request: Request,
    hub: Hub,
    *,
    kind: str,
    wake_key: str,
    after: int,
    page_size: int,
    read_page: Callable[[int], Awaitable[Page]],
    frame: Callable[[int, bytes], bytes],
) -> StreamingResponse:
    keepalive = hub.config.sse_keepalive_seconds

    async def frames() -> AsyncIterator[bytes]:
        position = after
        gauge = hub.metrics.open_streams.labels(kind)
        gauge.inc()
        try:
            yield b": stream open\n\n"
            while True:
                woken = hub.notifier.event(wake_key)
                try:
                    rows = await read_page(position)
                except AgentpostError as exc:
                    # Access lost mid-stream (e.g. removed from the room): end cleanly; a
                    # reconnect gets the refusal as a status.
                    log.info("%s stream closed: %s", kind, exc.message)
                    return
                if rows:
                    yield b"".join(frame(pos, body) for pos, body in rows)
                    position = rows[-1][0]
                    await asyncio.sleep(0)
                    if await request.is_disconnected():
                        return
                if len(rows) == page_size:
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
