"""Presence (docs/presence.md): when each member was last seen, and whether they are online.

A request only sets a dict entry in this process's memory (`seen`); no request writes to
the store for it. Every `flush_seconds` the entries seen since the last flush are upserted
in one write (store/presence.py), newest wins, so processes sharing a PostgreSQL database
meet in the store and a restart keeps "last seen"; a `kill -9` loses at most one flush
interval. An open stream keeps its member online: the flush re-stamps every member holding
one whenever their stamp is a third of the online window old (at most `STREAM_REFRESH_MS`),
so idle streams cost one row write per member every ~10 s, not one per flush. Reads take the newer of the store and
this process's memory.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from agentpost.core.clock import now_ms, rfc3339
from agentpost.core.errors import AgentpostError
from agentpost.store import presence
from agentpost.store.engine import Engine

log = logging.getLogger("agentpost.hub.presence")

STREAM_REFRESH_MS = 10_000
MAX_WRITTEN = 100_000  # bound on the memory of what was stored, refilled as members are seen


class Presence:
    def __init__(
        self,
        engine: Engine,
        online_seconds: float,
        flush_seconds: float,
        holders: Callable[[], Iterable[str]],
    ) -> None:
        self.engine = engine
        self.online_ms = int(online_seconds * 1000)
        self.stream_refresh_ms = min(STREAM_REFRESH_MS, self.online_ms // 3)
        self.flush_seconds = flush_seconds
        self._holders = holders  # members holding an open stream in this process
        self._pending: dict[str, int] = {}  # seen since the last flush
        self._flushing: dict[str, int] = {}  # being written now
        self._written: dict[str, int] = {}  # what this process last stored

    def seen(self, member_id: str) -> None:
        """The member made an authenticated request just now (the hot path: one dict set)."""
        self._pending[member_id] = now_ms()

    def local(self, member_id: str) -> int | None:
        """This process's newest stamp of the member, flushed or not."""
        found = [
            d[member_id] for d in (self._pending, self._flushing, self._written) if member_id in d
        ]
        return max(found) if found else None

    def last_seen(self, member_id: str, stored: int | None) -> int | None:
        """The newer of the stored `last_seen` and this process's own."""
        mine = self.local(member_id)
        if mine is None or (stored is not None and stored > mine):
            return stored
        return mine

    def online(self, last_seen: int | None, now: int | None = None) -> bool:
        return last_seen is not None and (now or now_ms()) - last_seen <= self.online_ms

    def _stamp_streams(self, now: int) -> None:
        for member_id in self._holders():
            last = self.local(member_id) or 0
            if now - last >= self.stream_refresh_ms:
                self._pending[member_id] = now

    async def flush(self) -> int:
        """Store what was seen since the last flush; returns how many members. On a storage
        failure the stamps stay pending for the next flush (nothing is dropped)."""
        self._stamp_streams(now_ms())
        if not self._pending:
            return 0
        batch, self._pending = self._pending, {}
        self._flushing = batch
        try:
            await self.engine.write(lambda tx: presence.record(tx, batch))
        except BaseException:
            for member_id, at in batch.items():
                if self._pending.get(member_id, 0) < at:
                    self._pending[member_id] = at
            raise
        finally:
            self._flushing = {}
        if len(self._written) + len(batch) > MAX_WRITTEN:
            self._written.clear()
        self._written.update(batch)
        return len(batch)

    async def run(self) -> None:
        """Flush every `flush_seconds` until cancelled."""
        while True:
            await asyncio.sleep(self.flush_seconds)
            try:
                await self.flush()
            except AgentpostError as exc:
                log.warning("presence flush postponed (kept in memory): %s", exc.message)


def when(ms: int | None) -> str | None:
    return None if ms is None else rfc3339(ms)
