"""Every idempotency decision of the hub (docs/api.md), in one place.

- Keys are 1–255 visible ASCII characters, scoped per member.
- The fingerprint is sha256 over JCS of {route, room, normalized body}.
- The claim, the event and the stored response commit in ONE transaction: a crash before
  commit leaves the key free, after commit the answer is known. No key is ever left
  "running" across a crash.
- Same key + same fingerprint within the TTL: the stored status and body, byte for byte,
  `Idempotency-Status: replayed`. Other fingerprint: 422 `idempotency_conflict`.
- Same key while the first is in flight: wait (bounded), then replay; past the bound
  409 `idempotency_in_flight` with `state: running`.
- A refusal for content (`Rejected`) is recorded as state `rejected` and replayed as such,
  and only that record commits: the refused job's other writes (its seq) are undone first;
  every other refusal rolls back with the job and leaves the key unused.
- Send state (docs/threads.md "Sending once"): a key's record is readable by its sender,
  whatever became of the room.
- An answer never changes while its key lives (only the sweep deletes a record, past its
  TTL; a renewal needs it expired), so this process replays the answers it saw committed
  from memory (`RecentAnswers`). A key it does not know goes straight to the write, whose
  claim is the authority and answers a key recorded before (by another process, or before a
  restart) from its record; it is read first only when work would run before the write
  (`prepare`: the router's model), which a replay must never trigger (issue 14: −14 % CPU
  per keyed post).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import msgspec

from agentpost.core.errors import AgentpostError, Code, RequestError, StorageUnavailable
from agentpost.core.ids import IDEMPOTENCY_KEY, IDEMPOTENCY_KEY_RULE
from agentpost.core.jcs import sha256_hex
from agentpost.store import keys
from agentpost.store.batch import AsData
from agentpost.store.engine import Engine, Tx, UndoJob
from agentpost.store.models import KeyRecord

HEADER = "Idempotency-Key"
STATUS_HEADER = "Idempotency-Status"
CREATED = "created"
REPLAYED = "replayed"
STATE_CREATED = "created"
STATE_REJECTED = "rejected"


class Rejected(AgentpostError):
    """A refusal for the request's content by a room policy: it consumes the key
    (docs/architecture.md#one-key-one-event)."""

    def __init__(self, message: str, reason: str, room_id: str | None = None) -> None:
        super().__init__(Code.COMMAND_REJECTED, message, reason=reason)
        self.room_id = room_id  # recorded with the key, so send state knows the room


@dataclass(frozen=True)
class Created:
    """What a job made: the response and the event it belongs to."""

    status: int
    body: bytes
    room_id: str | None
    event_id: str | None


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    idempotency_status: str


@dataclass(frozen=True, slots=True)
class Known:
    """What a replay needs of a committed key record."""

    fingerprint: str
    status: int
    body: bytes
    created_at: int  # ms; never later than the record's own (expiry is never late)


class RecentAnswers:
    """The answers of keys this process saw committed, newest kept, bounded by count and by
    body bytes. Forgetting one is always safe: its key then goes to the claim."""

    def __init__(self, max_entries: int = 100_000, max_bytes: int = 32 * 1024 * 1024) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._bytes = 0
        self._known: OrderedDict[tuple[str, str], Known] = OrderedDict()

    def get(self, slot: tuple[str, str], cutoff: int) -> Known | None:
        known = self._known.get(slot)
        if known is None or known.created_at >= cutoff:
            return known
        # Expired: the key is new again, the claim decides (docs/architecture.md#one-key-one-event).
        self._drop(slot)
        return None

    def put(self, slot: tuple[str, str], known: Known) -> None:
        if slot in self._known:
            self._drop(slot)
        self._known[slot] = known
        self._bytes += len(known.body)
        while len(self._known) > self.max_entries or self._bytes > self.max_bytes:
            _slot, old = self._known.popitem(last=False)
            self._bytes -= len(old.body)

    def _drop(self, slot: tuple[str, str]) -> None:
        self._bytes -= len(self._known.pop(slot).body)

    def prune(self, cutoff: int) -> int:
        """Forget the answers of keys made before `cutoff` (expired: a replay would find the
        key new anyway), oldest first; how many. Without it they would wait for the count or
        byte bound to push them out, and hold memory an idle hub never gives back."""
        gone = 0
        while self._known:
            slot, known = next(iter(self._known.items()))
            if known.created_at >= cutoff:
                break
            self._drop(slot)
            gone += 1
        return gone

    def __len__(self) -> int:
        return len(self._known)


def check_key(raw: str | None) -> str | None:
    """The key if present and well-formed; 400 `invalid_idempotency_key` otherwise."""
    if raw is None:
        return None
    if not IDEMPOTENCY_KEY.fullmatch(raw):
        raise RequestError(
            Code.INVALID_IDEMPOTENCY_KEY, f"Idempotency-Key must be {IDEMPOTENCY_KEY_RULE}"
        )
    return raw


def fingerprint(route: str, room_id: str, normalized: object) -> str:
    return sha256_hex({"route": route, "room": room_id, "body": normalized})


class Idempotency:
    """Runs keyed writes so that one (member, key) makes at most one thing."""

    def __init__(self, engine: Engine, ttl_seconds: int, wait_seconds: float) -> None:
        self.engine = engine
        self.ttl_ms = ttl_seconds * 1000
        self.wait_seconds = wait_seconds
        self._in_flight: dict[tuple[str, str], asyncio.Future[None]] = {}
        self.recent = RecentAnswers()

    def in_flight(self) -> int:
        return len(self._in_flight)

    def _cutoff(self) -> int:
        return int(time.time() * 1000) - self.ttl_ms

    def _from_record(self, rec: KeyRecord | Known, fp: str) -> Answer:
        if rec.fingerprint != fp:
            raise RequestError(
                Code.IDEMPOTENCY_CONFLICT,
                "this Idempotency-Key was already used for a different request; nothing was posted",
            )
        return Answer(rec.status, rec.body, REPLAYED)

    async def lookup(self, member_id: str, key: str) -> KeyRecord | None:
        """The live record of a key, for the send-state route (docs/threads.md "Sending once")."""
        rec = await self.engine.read(lambda db: keys.get(db, member_id, key))
        return rec if rec is not None and rec.created_at >= self._cutoff() else None

    async def send_state(self, member_id: str, key: str, room_id: str) -> KeyRecord:
        """What the hub recorded for the caller's key in `room_id` (send state, docs/threads.md
        "Sending once").

        Looked up under the caller's own member id, so only a key's sender can read it, and
        before anything about the room: a delivered key is reported even after its room was
        archived or its sender left it. A created record counts in its own room only; a
        rejected one names no room (its refusal made no event) while its key is spent for
        its member everywhere, so it is reported wherever asked. Nothing live: 404
        `send_not_found`, and the key is unused."""
        rec = await self.lookup(member_id, key)
        if rec is None or (rec.room_id is not None and rec.room_id != room_id):
            raise RequestError(
                Code.SEND_NOT_FOUND, "nothing is recorded for this key in this room; it is unused"
            )
        return rec

    async def run(
        self,
        member_id: str,
        key: str,
        fp: str,
        create: Callable[[Tx], Created],
        prepare: Callable[[], Awaitable[None]] | None = None,
        order: str = "",
        as_data: AsData | None = None,
    ) -> Answer:
        """Answer a keyed request; `prepare` runs only when the key is new (before the
        write), so a replay does no work beyond the lookup. `as_data`: the same write as
        data (hub/posting.py `write_plain`), which answers as `_claim` would or declines."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_seconds
        slot = (member_id, key)
        while True:
            known = self.recent.get(slot, self._cutoff())
            if known is not None:
                return self._from_record(known, fp)
            # The claim in the write transaction is the authority on a key (it answers one
            # recorded before from its record); reading the key first only matters when work
            # would run before the write (`prepare`: the router's model), which a replay
            # must never trigger. Otherwise a new key, the common case, skips that read.
            rec = await self.lookup(member_id, key) if prepare is not None else None
            if rec is not None:
                self._remember(rec)
                return self._from_record(rec, fp)
            first = self._in_flight.get(slot)
            if first is None:
                break
            remaining = deadline - loop.time()
            try:
                await asyncio.wait_for(asyncio.shield(first), max(remaining, 0))
            except TimeoutError:
                raise RequestError(
                    Code.IDEMPOTENCY_IN_FLIGHT,
                    "a request with this Idempotency-Key is still running; retry later",
                    state="running",
                ) from None
        mine: asyncio.Future[None] = loop.create_future()
        self._in_flight[slot] = mine
        try:
            if prepare is not None:
                await prepare()
            # Before the claim's own clock reading: the remembered expiry is never late.
            asked_at = int(time.time() * 1000)
            outcome = await self.engine.write(
                lambda tx: self._claim(tx, member_id, key, fp, create), order, as_data
            )
            if isinstance(outcome, KeyRecord):  # committed before: by another process,
                self._remember(outcome)  # or by this one before it restarted
            else:  # committed now (a created event or a recorded refusal)
                self.recent.put(slot, Known(fp, outcome.status, outcome.body, asked_at))
        finally:
            del self._in_flight[slot]
            mine.set_result(None)
        if isinstance(outcome, KeyRecord):
            return self._from_record(outcome, fp)
        return outcome

    def _remember(self, rec: KeyRecord) -> None:
        slot = (rec.member_id, rec.key)
        self.recent.put(slot, Known(rec.fingerprint, rec.status, rec.body, rec.created_at))

    def _claim(
        self, tx: Tx, member_id: str, key: str, fp: str, create: Callable[[Tx], Created]
    ) -> Answer | KeyRecord:
        now = int(time.time() * 1000)
        taken = self._take(tx, member_id, key, fp, now)
        if taken is not None:
            return taken
        try:
            made = create(tx)
        except Rejected as exc:
            # The refusal is recorded, but nothing else the job wrote may commit with it:
            # the seq it took above all (gap-free seqs, docs/architecture.md#data-model). Undo the
            # job, then record.
            refused = Created(422, msgspec.json.encode(exc.body()), exc.room_id, None)
            raise UndoJob(
                lambda tx: self._record_rejected(tx, member_id, key, fp, now, refused)
            ) from exc
        return self._finish(tx, member_id, key, fp, now, made, STATE_CREATED)

    def _take(self, tx: Tx, member_id: str, key: str, fp: str, now: int) -> KeyRecord | None:
        """Claim the key in `tx`; the live record that holds it instead, if any.

        On PostgreSQL other processes commit between our statements: a record our claim
        ran into may be swept (expired) before we read it, and an expired one may be renewed
        before our delete. Each turns into one more claim, never a second post."""
        for _ in range(3):
            if keys.claim(tx, member_id, key, fp, now):
                return None
            rec = keys.get(tx, member_id, key)
            if rec is None:
                continue  # swept and committed since our claim: the key is free, claim again
            cutoff = self._cutoff()
            if rec.created_at >= cutoff:
                return rec
            # The key is new again (docs/architecture.md#one-key-one-event).
            keys.delete_expired(tx, member_id, key, cutoff)
            if keys.claim(tx, member_id, key, fp, now):
                return None
            # Another process renewed it first (it deleted the expired record and committed
            # a new one, before or while we waited): answer from that one.
            renewed = keys.get(tx, member_id, key)
            if renewed is not None:
                return renewed
        raise StorageUnavailable(
            f"the key {key!r} kept changing hands between hub processes; nothing was written, retry"
        )

    def _record_rejected(
        self, tx: Tx, member_id: str, key: str, fp: str, now: int, refused: Created
    ) -> Answer | KeyRecord:
        # The undo gave the claim back too: take the key again (on PostgreSQL another
        # process may have recorded it meanwhile; then its record answers).
        taken = self._take(tx, member_id, key, fp, now)
        if taken is not None:
            return taken
        return self._finish(tx, member_id, key, fp, now, refused, STATE_REJECTED)

    def _finish(
        self, tx: Tx, member_id: str, key: str, fp: str, now: int, made: Created, state: str
    ) -> Answer:
        keys.finish(
            tx,
            KeyRecord(
                member_id=member_id,
                key=key,
                fingerprint=fp,
                state=state,
                status=made.status,
                body=made.body,
                room_id=made.room_id,
                event_id=made.event_id,
                created_at=now,
            ),
        )
        return Answer(made.status, made.body, CREATED)

    async def sweep(self, limit: int = 1000) -> int:
        """Delete expired records in small batches so the sweep never blocks posting."""
        cutoff = self._cutoff()
        self.recent.prune(cutoff)
        total = 0
        while True:
            n = await self.engine.write(lambda tx: keys.sweep(tx, cutoff, limit))
            total += n
            if n < limit:
                return total
