"""Following the agent member's inbox (docs/connect.md "Turns"): the SSE stream with a
long-poll fallback, and the acknowledged cursor, which only passes wake-ups that are all
done (a wake-up is done once its reply is posted or it is decided that it gets no Turn).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from agentpost.client import AsyncHubClient, HubError, HubRefused, InboxItem
from agentpost.connect import replies

log = logging.getLogger("agentpost.connect.worker")

LONG_POLL = 20.0

Accept = Callable[[InboxItem], Awaitable[None]]


async def follow(client: AsyncHubClient, accept: Accept) -> None:
    """Hand every inbox item to `accept`, for ever; raise only when the token is refused."""
    after: int | None = None
    delay = 0.5
    while True:
        try:
            async for item in client.inbox_stream(after):
                after = item.cursor
                await accept(item)
                delay = 0.5
        except HubRefused as exc:
            if exc.status in (401, 403):
                raise RuntimeError(f"the hub refuses this agent's token: {exc}") from exc
            log.warning("inbox stream refused: %s", exc)
        except HubError as exc:
            log.warning("inbox stream cut (%s); long-polling", exc)
        try:  # the fallback: one long poll, then the stream again
            page = await client.inbox(after=after, wait=LONG_POLL)
            for item in page.items:
                after = item.cursor
                await accept(item)
        except HubRefused as exc:
            if exc.status in (401, 403):
                raise RuntimeError(f"the hub refuses this agent's token: {exc}") from exc
            await asyncio.sleep(delay)
        except HubError as exc:
            log.warning("inbox long poll failed (%s); retrying in %.1fs", exc, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 15.0)


class InboxCursor:
    """Which wake-ups were seen, which are still open, and how far the hub was acked."""

    def __init__(
        self,
        client: AsyncHubClient,
        counters: dict[str, int],
        fence: Callable[[], int | None] = lambda: None,
        refused: Callable[[HubRefused], None] = lambda exc: None,
    ) -> None:
        self.client = client
        # The Worker's lease (docs/architecture.md#one-worker-per-agent), named on every ack.
        self._fence = fence
        self._refused = refused
        self.counters = counters
        self.acked = 0
        self._seen: set[int] = set()
        self._open: set[int] = set()
        self._max_seen = 0
        self._lock = asyncio.Lock()

    def take(self, cursor: int) -> bool:
        """Open a wake-up; False when it was seen before or is already acknowledged."""
        if cursor in self._seen or cursor <= self.acked:
            return False
        self._seen.add(cursor)
        self._open.add(cursor)
        self._max_seen = max(self._max_seen, cursor)
        return True

    async def done(self, cursor: int) -> None:
        """A wake-up is finished: acknowledge every cursor up to the first one still open."""
        self._open.discard(cursor)
        top = min(self._open) - 1 if self._open else self._max_seen
        if top <= self.acked:
            return
        async with self._lock:
            if top <= self.acked:
                return
            try:
                self.acked = await replies.until_answered(
                    f"ack {top}", lambda: self.client.ack(top, self._fence())
                )
                self.counters["acks"] += 1
            except HubRefused as exc:
                log.error("ack %d refused: %s", top, exc)
                self._refused(exc)

    def status(self) -> dict[str, Any]:
        return {"acked": self.acked, "seen": self._max_seen, "open": sorted(self._open)}
