"""The retention sweep (docs/operations.md "Retention"): per workspace and per room, events
are kept N seconds and files M seconds (for ever unless set); the hub's sweep ends what is
older, in small batches, each its own short transaction on the room's writer, so posts to
the room wait at most one batch.

An event that expires becomes a tombstone: it keeps its place (id, seq, sender, time, what
it replied to, the hub's own marks) with no text, files, reactions or user metadata,
`redacted: true` and `metadata.retention.expired_at`; search forgets it, and its edits lose
their text with it. So `after=` paging, inbox cursors, receipts and replies still name what
they named. A tombstone is kept as long again as its event was, then removed with the
acknowledged inbox items, answers and receipts that named it: the room's events then run from
its `floor_seq`+1, still gap-free (a page `after=` an older seq starts there). An event
something still needs stays whole (held) until it no longer does: an
active member's inbox item not yet acknowledged, a delegation that an agent it named (still
active and in the room) has not answered with a terminal receipt, acknowledged or not (the
late receipt must find it, to wake its delegator), an AG2 task in progress. A file expires with its event, or after the room's file retention:
its download is then 410 `media_expired`, except while an unacknowledged inbox item's event
carries it. Bytes no kept media row names are removed from the blob store (hub/blobs.py
`free`, which leaves alone bytes an upload just touched).

Every step is safe to cut at any moment (kill -9): each batch commits as a whole (the marks
and the room's `retention_seq` together), a file's bytes go only after the rows that named
them are committed as expired, and bytes set aside by a `free` that was cut are put back or
removed by the next sweep.
"""

from __future__ import annotations

import logging
import os
import signal
from dataclasses import dataclass, field
from typing import Any

import msgspec

from agentpost.core import clock, ids
from agentpost.core.errors import AgentpostError
from agentpost.hub import relations
from agentpost.hub.schemas import Event
from agentpost.hub.state import Hub
from agentpost.store import events, retention
from agentpost.store.engine import Db, Tx

log = logging.getLogger("agentpost.hub.retention")

# Tests: `AGENTPOST_RETENTION_CRASH=step:N` SIGKILLs the hub inside its N-th batch of events
# (before the commit), `free:N` at its N-th freeing of bytes, after they were set aside.
CRASH_ENV = "AGENTPOST_RETENTION_CRASH"
_crashes: dict[str, int] = {}


def _crash_point(name: str) -> None:
    spec = os.environ.get(CRASH_ENV, "")
    point, _, nth = spec.partition(":")
    if point != name:
        return
    _crashes[name] = _crashes.get(name, 0) + 1
    if _crashes[name] >= int(nth or "1"):
        log.critical("crash point %s reached: SIGKILL", spec)
        os.kill(os.getpid(), signal.SIGKILL)


BATCH = 200  # events or files per transaction
BATCHES_PER_ROOM = 25  # per sweep: a room with a long backlog shares the sweep with others
HELD_RECHECK = 200  # held events looked at again per room and sweep
UNACKED_LOOKED_AT = 1000  # unacknowledged events whose files are spared; past it, all are


@dataclass
class Swept:
    events: int = 0
    held: int = 0
    media: int = 0
    blobs: int = 0
    removed: int = 0  # tombstones removed
    tasks: int = 0  # finished AG2 tasks removed
    freed: set[str] = field(default_factory=set)


def _cutoff_id(now_ms: int, keep_seconds: int) -> str:
    """The smallest event id of the moment `keep_seconds` ago: event ids are ULIDs, so an
    id below it was made before that moment. A moment before 1970 has no event before it."""
    return "ev_" + ids.ulid(max(0, now_ms - keep_seconds * 1000))[:10] + "0" * 16


class _Marks(msgspec.Struct):
    metadata: dict[str, Any] = {}


def _needed(tx: Tx, room_id: str, seq: int, event_id: str, body: bytes) -> bool:
    """Whether something still needs the event whole (the module's docstring says what)."""
    if retention.needed(tx, room_id, seq, event_id):
        return True
    marks = msgspec.json.decode(body, type=_Marks).metadata
    if not isinstance(marks.get("delegated_by"), str):
        return False  # not a delegation
    ids, names = marks.get("delegated_to_ids"), marks.get("delegated_to")
    ids = [str(i) for i in ids] if isinstance(ids, list) else []
    names = [str(n) for n in names] if isinstance(names, list) else []
    return retention.awaiting_answer(tx, room_id, event_id, ids, names)


def _expire_event(tx: Tx, body: bytes, at: str) -> tuple[list[str], bool]:
    """Make the event a tombstone; its files' ids, and whether it was one already."""
    ev = msgspec.json.decode(body, type=Event)
    if "retention" in ev.metadata:
        return [], True
    gone = relations.shown_redacted(ev)
    gone = msgspec.structs.replace(
        gone, metadata={**gone.metadata, "retention": {"expired_at": at}}
    )
    relations.reshow(tx, ev, gone)
    for rel_id, rel_body in events.relations_of(tx, ev.id):  # its edits carry its text
        rel = msgspec.json.decode(rel_body, type=Event)
        if not rel.redacted:
            events.replace_body(tx, rel_id, msgspec.json.encode(relations.shown_redacted(rel)))
    return [a.id for a in ev.attachments], False


def _expire_files(tx: Tx, room_id: str, files: list[str], now: int, seq: int) -> list[str]:
    """The files of the event at `seq`, which expires: those no later event carries, and no
    event an active member has not acknowledged (their sha256)."""
    if not files:
        return []
    spared = _spared_media(tx, room_id)
    if spared is None:
        return []
    return retention.expire_media(tx, room_id, [f for f in files if f not in spared], now, seq)


def _spared_media(db: Db, room_id: str) -> set[str] | None:
    """Ids of the files an unacknowledged inbox item's event carries (None: too many such
    events to look at; every file of the room is spared this time)."""
    bodies = retention.unacked_bodies(db, room_id, UNACKED_LOOKED_AT + 1)
    if len(bodies) > UNACKED_LOOKED_AT:
        return None
    out = set()
    for body in bodies:
        ev = msgspec.json.decode(body, type=Event)
        out.update(a.id for a in ev.attachments)
    return out


class RetentionSweep:
    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.pending_blobs: set[str] = set()  # bytes to free once an upload's grace is over
        self.started = False  # the first sweep looks for bytes a killed hub left behind

    async def sweep(self) -> Swept:
        """One sweep over every room with a retention."""
        hub = self.hub
        swept = Swept()
        await self._finish_set_aside()
        if not self.started:
            hashes = await hub.engine.read(retention.expired_hashes)
            self.pending_blobs.update(h for h in hashes if hub.blobs.path_of(h).exists())
            self.started = True
        for kept in await hub.engine.read(retention.rooms_to_sweep):
            try:
                if kept.events is not None:
                    await self._events(kept.room_id, kept.events, swept)
                if kept.media is not None:
                    await self._media(kept.room_id, kept.media, swept)
            except AgentpostError as exc:
                log.warning("retention of room %s skipped this time: %s", kept.room_id, exc.message)
        await self._free(swept)
        await self._done_tasks(swept)
        return swept

    async def _done_tasks(self, swept: Swept) -> None:
        """Finished AG2 tasks go after the key lifetime, retention or not."""
        before = clock.now_ms() - self.hub.config.key_ttl_seconds * 1000

        def step(tx: Tx) -> bool:
            n = retention.forget_done_ag2_tasks(tx, before, BATCH)
            swept.tasks += n
            return n == BATCH

        for _ in range(BATCHES_PER_ROOM):
            if not await self.hub.engine.write(step):
                return

    async def _events(self, room_id: str, keep: int, swept: Swept) -> None:
        now = clock.now_ms()
        cutoff = _cutoff_id(now, keep)
        at = clock.rfc3339(now)

        def recheck(tx: Tx) -> None:
            retention.claim_room(tx, room_id)
            for seq, event_id, body in retention.held_events(tx, room_id, HELD_RECHECK):
                if event_id >= cutoff or _needed(tx, room_id, seq, event_id, body):
                    continue
                files, _ = _expire_event(tx, body, at)
                swept.freed.update(_expire_files(tx, room_id, files, now, seq))
                retention.release(tx, room_id, seq)
                swept.events += 1

        await self.hub.engine.write(recheck, room_id)

        def step(tx: Tx) -> bool:
            """One batch; True when there may be more."""
            upto = retention.claim_room(tx, room_id)
            rows = retention.next_events(tx, room_id, upto, BATCH)
            for seq, event_id, body in rows:
                if event_id >= cutoff:
                    retention.advance(tx, room_id, upto)
                    return False
                if _needed(tx, room_id, seq, event_id, body):
                    retention.hold(tx, room_id, seq)
                    swept.held += 1
                else:
                    files, already = _expire_event(tx, body, at)
                    swept.freed.update(_expire_files(tx, room_id, files, now, seq))
                    swept.events += 0 if already else 1
                upto = seq
            retention.advance(tx, room_id, upto)
            _crash_point("step")
            return len(rows) == BATCH

        for _ in range(BATCHES_PER_ROOM):
            if not await self.hub.engine.write(step, room_id):
                break
        # A tombstone is kept as long again as its event was, then removed for good.
        before = _cutoff_id(now, 2 * keep)

        def compact(tx: Tx) -> bool:
            retention.claim_room(tx, room_id)
            floor, upto = retention.floor_of(tx, room_id)
            new_floor = retention.compactable(tx, room_id, floor, min(upto, floor + BATCH), before)
            if new_floor == floor:
                return False
            swept.removed += retention.compact(tx, room_id, floor, new_floor)
            retention.forget_media(tx, room_id, now - keep * 1000, BATCH)
            _crash_point("compact")
            return True

        for _ in range(BATCHES_PER_ROOM):
            if not await self.hub.engine.write(compact, room_id):
                return

    async def _media(self, room_id: str, keep: int, swept: Swept) -> None:
        now = clock.now_ms()

        def step(tx: Tx) -> bool:
            old = retention.old_media(tx, room_id, now - keep * 1000, BATCH)
            if not old:
                return False
            spared = _spared_media(tx, room_id)
            if spared is None:
                return False
            ids_ = [media_id for media_id, _ in old if media_id not in spared]
            gone = retention.expire_media(tx, room_id, ids_, now)
            swept.media += len(gone)
            swept.freed.update(gone)
            return len(old) == BATCH and bool(ids_)

        for _ in range(BATCHES_PER_ROOM):
            if not await self.hub.engine.write(step, room_id):
                break

        def forget(tx: Tx) -> bool:
            return retention.forget_media(tx, room_id, now - keep * 1000, BATCH) == BATCH

        for _ in range(BATCHES_PER_ROOM):  # an expired file's row goes as long again after
            if not await self.hub.engine.write(forget, room_id):
                return

    async def _free(self, swept: Swept) -> None:
        """Free the bytes of what expired (after its rows committed), and what waited."""
        candidates = swept.freed | self.pending_blobs
        if not candidates:
            return

        def named(db: Db) -> set[str]:
            return {sha for sha in candidates if retention.still_named(db, sha)}

        kept = await self.hub.engine.read(named)
        self.pending_blobs = set()
        for sha in sorted(candidates - kept):
            if self.hub.blobs.free(sha, before_unlink=lambda: _crash_point("free")):
                swept.blobs += 1
            else:
                self.pending_blobs.add(sha)

    async def _finish_set_aside(self) -> None:
        aside = self.hub.blobs.set_aside()
        if not aside:
            return

        def named(db: Db) -> set[str]:
            return {sha for sha, _ in aside if retention.still_named(db, sha)}

        kept = await self.hub.engine.read(named)
        for sha, path in aside:
            if sha in kept:
                self.hub.blobs.put_back(sha, path)
            else:
                path.unlink(missing_ok=True)


def settings_out(own_events: Any, own_media: Any, events_: Any, media_: Any) -> dict[str, Any]:
    return {
        "events_seconds": own_events,
        "media_seconds": own_media,
        "effective": {"events_seconds": events_, "media_seconds": media_},
    }
