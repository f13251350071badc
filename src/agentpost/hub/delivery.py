"""Delivery state of one event (docs/delivery.md): per target `queued` (inbox row),
`read` (handed to their client by poll or stream) or `acked` (their cursor passed it), and
for a delegation each delegate's receipt (`replied` with its kind, or `pending`).

Only a participant of the event's room is told; anyone else gets the same 404 as for an
event that does not exist, so the answer never says which events exist elsewhere."""

from __future__ import annotations

import msgspec

from agentpost.core.clock import rfc3339
from agentpost.core.errors import Code, RequestError
from agentpost.hub.schemas import DeliveryOut, Event, ReceiptState, TargetState
from agentpost.store import delivery, events, rooms
from agentpost.store.engine import Db
from agentpost.store.models import Member

QUEUED = "queued"
READ = "read"
ACKED = "acked"
REMOVED = "removed"  # the target was hard-removed: its inbox row is gone with it
REPLIED = "replied"
PENDING = "pending"


def _time(ms: int | None) -> str | None:
    return None if ms is None else rfc3339(ms)


def state_of(db: Db, who: Member, event_id: str, room_id: str | None = None) -> DeliveryOut:
    """The delivery state of `event_id` as `who` may see it; 404 `event_not_found` when it
    does not exist, is not in `room_id` (when given), or `who` is not in its room."""
    found = events.by_id(db, event_id)
    if found is None or (room_id is not None and found[0] != room_id):
        raise RequestError(Code.EVENT_NOT_FOUND, f"no event {event_id!r}")
    room = rooms.room_by_id(db, found[0])
    if room is None or room.workspace_id != who.workspace_id:
        raise RequestError(Code.EVENT_NOT_FOUND, f"no event {event_id!r}")
    if not rooms.is_participant(db, room.id, who.id):
        raise RequestError(Code.EVENT_NOT_FOUND, f"no event {event_id!r}")
    event = msgspec.json.decode(found[2], type=Event)
    rows = {r.member: r for r in delivery.targets(db, room.id, event.seq)}
    targets = []
    for name in event.targets:
        row = rows.get(name)
        if row is None:
            targets.append(_target(name, REMOVED, REMOVED, None, None))
            continue
        state = ACKED if row.acked_cursor >= row.cursor else READ if row.read_at else QUEUED
        targets.append(_target(name, state, row.status, row.read_at, row.acked_at))
    agents = [r.member for r in rows.values() if r.kind == "agent"]
    return DeliveryOut(event.id, room.id, targets, _receipts(db, event, agents))


def receipts_for(db: Db, event: Event) -> list[ReceiptState] | None:
    """The `receipts` of `event`'s delivery state (None: it asked no agent), for a reader
    already allowed to read its room (an export, hub/export.py)."""
    agents: list[str] = []
    if event.sender_kind == "human" and event.targets:
        rows = delivery.targets(db, event.room, event.seq)
        agents = [r.member for r in rows if r.kind == "agent"]
    return _receipts(db, event, agents)


def _target(
    name: str, state: str, status: str, read_at: int | None, acked_at: int | None
) -> TargetState:
    return TargetState(name, state, status, _time(read_at), _time(acked_at))


def _receipts(db: Db, event: Event, agents: list[str]) -> list[ReceiptState] | None:
    """Who owes an answer and whether it came: for an agent's delegation, each delegate's receipt
    (its terminal slot, docs/architecture.md#receipts); for a person's message, each agent it woke
    and the answer that told the person. None when the event asked no agent."""
    delegated_to = event.metadata.get("delegated_to")
    if isinstance(delegated_to, list) and delegated_to:
        slots = delivery.receipts_of(db, event.id)
        owed: dict[str, tuple[str | None, int, bool]] = {}
        for n in map(str, delegated_to):
            terminal, needs_input = slots.get(n, (None, 0))
            owed[n] = (terminal, needs_input, terminal is not None)
    elif event.sender_kind == "human" and agents:
        answered = delivery.answers_of(db, event.id)
        owed = {n: (answered.get(n), 0, n in answered) for n in agents}
    else:
        return None
    out = []
    for name, (reply, needs_input, replied) in owed.items():
        kind = None
        if reply is not None:
            found = events.by_id(db, reply)
            if found is not None:
                kind = msgspec.json.decode(found[2], type=Event).reply_kind
        state = REPLIED if replied else PENDING
        out.append(ReceiptState(name, state, kind, reply, needs_input))
    return out
