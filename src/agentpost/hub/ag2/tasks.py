"""AG2 tasks and their leases (docs/architecture.md#ag2-relay-profile, docs/ag2.md): every rule of
when a task is served, extended, re-served or dropped, run inside the write transaction of the
request.

A task is one inbox row of the agent member, named by its event id. A poll takes the
member's new inbox rows in as tasks, then, under the member's poller row lock:
- a held lease is extended: an acked one for as long as the poller polls, an un-acked one
  `UNACKED_GRACE` times (as AG2's broker does), so a Worker that took a task and never said
  so gets it back soon;
- a lease past its time is re-served with `attempt` + 1, or, after `MAX_ATTEMPTS`, dropped:
  a hub notice under the message says the agent never took it, and the wake-up is acked;
- at most one task per room is out at a time, oldest first: every room op the agent makes
  in a room while its task there is out belongs to that task (`linked_task`).
A heartbeat says how many tasks the Worker has in hand (`inflight`: taken in and not yet
answered). Fewer than the acked leases the hub holds for it means the Worker lost some (a
restarted Worker that dropped its predecessor's ids): every lease of the member is released
and served again with `attempt` + 1 (`heartbeat`); the relay client re-acks a task it still
has and runs one it lost.
The inbox cursor follows: it is acknowledged up to the oldest task still open.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from agentpost.core.ids import new_id
from agentpost.hub import posting
from agentpost.hub.notify import inbox_key, room_key
from agentpost.hub.routing import fences
from agentpost.hub.schemas import Event
from agentpost.store import ag2, delivery, events, inbox, members, rooms
from agentpost.store.ag2 import DONE, DROPPED, LEASED, Task
from agentpost.store.engine import Tx
from agentpost.store.models import Member

MAX_ATTEMPTS = 5
UNACKED_GRACE = 2
INTAKE_PAGE = 100
DROP_TEXT = (
    "{agent} never took this message: it was handed to its AG2 Worker {attempts} times"
    " and not answered, so the hub dropped it."
)


@dataclass(frozen=True)
class Served:
    """A task handed out by this poll, with the event it names."""

    task: Task
    event: Event


def event_of(tx: Tx, event_id: str) -> Event | None:
    found = events.by_id(tx, event_id)
    return None if found is None else msgspec.json.decode(found[2], type=Event)


def poll(tx: Tx, member: Member, now: int, lease_ms: int, extend: bool = True) -> list[Served]:
    """One poll of the member's tasks: intake, extend, expire, serve (see the module).
    `extend` is False when a waiting poll looks again: one request extends once."""
    intake_cursor = ag2.lock_poller(tx, member.id)
    _intake(tx, member, intake_cursor, now)
    busy: set[str] = set()
    for t in ag2.open_tasks(tx, member.id):
        if t.state != LEASED:
            continue
        if t.lease_until >= now:
            if not extend:
                pass
            elif t.acked:
                ag2.extend(tx, t, now + lease_ms, t.grace, True)
            elif t.grace < UNACKED_GRACE:
                ag2.extend(tx, t, now + lease_ms, t.grace + 1, False)
            busy.add(t.room_id)
        elif t.attempt >= MAX_ATTEMPTS:
            _drop(tx, member, t, now)
        else:
            ag2.requeue(tx, t)
    served: list[Served] = []
    for t in ag2.open_tasks(tx, member.id):
        if t.state == LEASED or t.room_id in busy:
            continue
        ev = event_of(tx, t.event_id)
        if ev is None:  # the event is gone (retention): nothing to hand out
            ag2.finish(tx, t, DROPPED, now)
            continue
        ag2.lease(tx, t, t.attempt + 1, now + lease_ms)
        # Handed out (docs/delivery.md).
        delivery.mark_read(tx, member.id, t.cursor - 1, t.cursor, now)
        busy.add(t.room_id)
        served.append(Served(ag2.get(tx, member.id, t.event_id) or t, ev))
    _advance_inbox(tx, member, now)
    return served


def next_expiry(tx: Tx, member: Member) -> int | None:
    """When the member's earliest lease runs out (ms), for a poll to wake then."""
    leased = [t.lease_until for t in ag2.open_tasks(tx, member.id) if t.state == LEASED]
    return min(leased) if leased else None


def ack(tx: Tx, member: Member, task_id: str, now: int, lease_ms: int) -> Task | None:
    """Mark a live lease received (and extend it); None when the task is not leased to
    the member now (never served, expired, answered or dropped)."""
    ag2.lock_poller(tx, member.id)
    t = ag2.get(tx, member.id, task_id)
    if t is None or t.state != LEASED or t.lease_until < now:
        return None
    ag2.extend(tx, t, now + lease_ms, t.grace, True)
    return t


def heartbeat(tx: Tx, member: Member, inflight: int | None) -> int:
    """The Worker says it has `inflight` tasks in hand. When that is fewer than the acked
    leases the hub holds for it, it lost some, and the hub cannot tell which: every lease
    is released and served again (attempt + 1) by the next poll. A Worker that still has a
    task re-acks it and does not run it again; one that lost it runs it, and its first room
    message edits the earlier attempt's reply. Returns how many leases were released."""
    if inflight is None:
        return 0
    ag2.lock_poller(tx, member.id)
    leased = [t for t in ag2.open_tasks(tx, member.id) if t.state == LEASED]
    if inflight >= sum(1 for t in leased if t.acked):
        return 0
    for t in leased:
        ag2.requeue(tx, t)
    tx.notify(inbox_key(member.id))  # a waiting poll serves them at once
    return len(leased)


def linked_task(tx: Tx, member: Member, room_id: str) -> Task | None:
    """The member's served, unanswered task in the room: what its room ops there answer."""
    return ag2.open_in_room(tx, member.id, room_id)


def complete(tx: Tx, member: Member, t: Task, now: int) -> None:
    """The task is answered. A poll waiting in any hub process looks again: the next
    message in the task's room can be served now."""
    ag2.finish(tx, t, DONE, now)
    _advance_inbox(tx, member, now)
    tx.notify(inbox_key(member.id))


def _intake(tx: Tx, member: Member, intake_cursor: int, now: int) -> None:
    after = max(intake_cursor, members.inbox_cursor(tx, member.id))
    rows = inbox.page(tx, member.id, after, INTAKE_PAGE)
    for cursor, body in rows:
        ev = msgspec.json.decode(body, type=Event)
        ag2.add(tx, member.id, ev.id, ev.room, cursor, now)
    last = rows[-1][0] if rows else after
    ag2.set_intake(tx, member.id, last, now)


def _drop(tx: Tx, member: Member, t: Task, now: int) -> None:
    """Give up on a task nobody answered: say so under its message, and ack the wake-up."""
    ag2.finish(tx, t, DROPPED, now)
    room = rooms.room_by_id(tx, t.room_id)
    if room is None:
        return
    rooms.lock(tx, room.id)
    text = DROP_TEXT.format(agent=member.name, attempts=t.attempt)
    notice = fences.Notice(new_id("ev"), text, {"ag2/dropped": t.event_id})
    posting.append_notice(tx, room, notice, about=t.event_id)
    tx.notify(room_key(room.id))


def _advance_inbox(tx: Tx, member: Member, now: int) -> None:
    """Acknowledge the member's inbox up to its oldest open task (or all taken in)."""
    open_cursors = [t.cursor for t in ag2.open_tasks(tx, member.id)]
    intake = ag2.lock_poller(tx, member.id)
    target = min(open_cursors) - 1 if open_cursors else intake
    before = members.inbox_cursor(tx, member.id)
    if target > before:
        members.set_inbox_cursor(tx, member.id, target)
        delivery.mark_acked(tx, member.id, before, target, now)
