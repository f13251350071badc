"""One server-sent-events loop for the room stream and the inbox stream (docs/api.md).

Data always comes from the store, after the position the reader has; a wake-up only says
"look again". The bytes in flight per stream are bounded: a page holds at most
`PAGE_BYTES` of bodies (at least one event), and it goes out in chunks of about
`CHUNK_BYTES`, each handed over only once the transport has drained the one before (the
server's send waits while its write buffer is full). A reader that stops reading therefore
holds one page of the hub's memory, never its backlog; the rest stays in the store. The
loop reads on while pages come back full (at their row limit or byte budget), then waits;
silence is broken by `: keep-alive` comments so proxies keep the connection. A member
holds a bounded number of streams (hub/streams.py); every stream ends when the hub shuts
down. A stream may carry frames beside its events (a room's presence, `SideFrames`): looked
at after each page read and on their own timer while the stream waits, never per event.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import Protocol

from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from agentpost.core.errors import AgentpostError
from agentpost.hub.notify import wait
from agentpost.hub.state import Hub
from agentpost.store.events import Page
from agentpost.store.models import Member

log = logging.getLogger("agentpost.hub")

PAGE_EVENTS = 200
PAGE_BYTES = 512 * 1024
CHUNK_BYTES = 64 * 1024


class SideFrames(Protocol):
    """Frames a stream sends beside its events, without an `id:` (so a reader's
    Last-Event-ID never moves for them): one at open, then one whenever `changed` finds
    something new, looked at after each page read (with events or woken without any) and
    every `every` seconds while the stream waits."""

    every: float

    async def changed(self) -> bytes | None:
        """The frame to send now, or None when nothing changed since the last one."""
        ...


class _Stream(StreamingResponse):
    """A streaming response that gives its member's stream slot back however it ends
    (finished, client gone, cancelled), even when its body never started."""

    def __init__(self, content: AsyncIterator[bytes], release: Callable[[], None]) -> None:
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def chunks(frames: Iterable[bytes], size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """`frames` joined into chunks of at most `size` bytes, or one frame when it is bigger."""
    batch: list[bytes] = []
    held = 0
    for f in frames:
        if batch and held + len(f) > size:
            yield b"".join(batch)
            batch, held = [], 0
        batch.append(f)
        held += len(f)
    if batch:
        yield b"".join(batch)


def sse_response(
    request: Request,
    hub: Hub,
    *,
    member: Member,
    kind: str,
    wake_key: str,
    after: int,
    read_page: Callable[[int], Awaitable[Page]],
    frame: Callable[[int, bytes], bytes],
    side: SideFrames | None = None,
) -> StreamingResponse:
    """The stream of `read_page` pages past `after`, with `side` frames when given; 429
    `too_many_streams` when `member` holds as many streams as it may."""
    keepalive = hub.config.sse_keepalive_seconds
    release = hub.streams.take(member.id)
    hub.presence.seen(member.id)  # held open, it keeps its member online (hub/presence.py)
    notifier = hub.notifier
    clock = asyncio.get_running_loop().time

    async def side_frame() -> bytes | None:
        assert side is not None
        try:
            return await side.changed()
        except AgentpostError as exc:
            # The events go on; the next look (a page or the timer) tries again.
            log.warning("%s stream: side frame skipped this time: %s", kind, exc.message)
            return None

    async def frames() -> AsyncIterator[bytes]:
        position = after
        gauge = hub.metrics.open_streams.labels(kind)
        gauge.inc()
        try:
            yield b": stream open\n\n"
            due = math.inf  # when the side frames are looked at next
            if side is not None:
                if (extra := await side_frame()) is not None:
                    yield extra
                due = clock() + side.every
            sent = clock()  # the last write: a keep-alive follows `keepalive` s of silence
            while not notifier.closed:  # closed: the hub is shutting down
                woken = notifier.event(wake_key)
                try:
                    rows = await read_page(position)
                except AgentpostError as exc:
                    # Access lost mid-stream (e.g. removed from the room): end cleanly; a
                    # reconnect gets the refusal as a status.
                    log.info("%s stream closed: %s", kind, exc.message)
                    return
                full = False
                if rows:
                    for chunk in chunks(frame(pos, body) for pos, body in rows):
                        yield chunk  # the send waits here while the reader is behind
                    position, full = rows[-1][0], rows.full
                    del rows  # not held while the next page is read
                    sent = clock()
                    await asyncio.sleep(0)
                    if await request.is_disconnected():
                        return
                if side is not None:
                    # After each read of the store: a page's sender may have come online, and
                    # a wake-up with no page is a change of who takes part (a removal).
                    if (extra := await side_frame()) is not None:
                        yield extra
                        sent = clock()
                    due = clock() + side.every
                if full:  # cut by its limit or its size: more may be there already
                    continue
                # Wait for news; meanwhile side frames on their timer, and a keep-alive
                # after each `keepalive` s of silence, after which the store is read again.
                while True:
                    quiet_until = sent + keepalive
                    if await wait(woken, max(0.0, min(quiet_until, due) - clock())):
                        break
                    if notifier.closed:
                        break
                    if due < quiet_until:
                        assert side is not None
                        if (extra := await side_frame()) is not None:
                            yield extra
                            sent = clock()
                        due = clock() + side.every
                        continue
                    yield b": keep-alive\n\n"
                    sent = clock()
                    break
        finally:
            gauge.dec()

    return _Stream(frames(), release)
