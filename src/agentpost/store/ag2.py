"""AG2 tasks and their leases (docs/architecture.md#ag2-relay-profile): the rows of `ag2_tasks` and
`ag2_pollers`. The rules (when a lease is served, extended, re-served or dropped) live in
`hub/ag2/tasks.py`; this module only reads and writes the rows."""

from __future__ import annotations

import msgspec

from agentpost.store.engine import Db, Row

QUEUED = "queued"
LEASED = "leased"
DONE = "done"
DROPPED = "dropped"

_COLS = (
    "member_id, event_id, room_id, cursor, state, attempt, lease_until, acked, grace,"
    " reply_event, reply_attempt, created_at, done_at"
)


class Task(msgspec.Struct, frozen=True):
    """One AG2 task of an agent member: an inbox row, named by its event id."""

    member_id: str
    event_id: str
    room_id: str
    cursor: int
    state: str
    attempt: int
    lease_until: int
    acked: bool
    grace: int
    reply_event: str | None
    reply_attempt: int
    created_at: int
    done_at: int | None


def _task(row: Row) -> Task:
    return Task(
        member_id=str(row[0]),
        event_id=str(row[1]),
        room_id=str(row[2]),
        cursor=int(row[3]),
        state=str(row[4]),
        attempt=int(row[5]),
        lease_until=int(row[6]),
        acked=bool(row[7]),
        grace=int(row[8]),
        reply_event=None if row[9] is None else str(row[9]),
        reply_attempt=int(row[10]),
        created_at=int(row[11]),
        done_at=None if row[12] is None else int(row[12]),
    )


def lock_poller(db: Db, member_id: str) -> int:
    """Take the member's poller row lock (made on first use) for the rest of the
    transaction; returns its intake cursor. Every AG2 write of a member takes it first, so
    hub processes sharing a database serve that member's leases one at a time."""
    db.run(
        "INSERT INTO ag2_pollers (member_id) VALUES (?) ON CONFLICT (member_id) DO NOTHING",
        (member_id,),
    )
    sql = "SELECT intake_cursor FROM ag2_pollers WHERE member_id = ?"
    if db.dialect == "postgres":
        sql += " FOR UPDATE"
    row = db.one(sql, (member_id,))
    assert row is not None, "the row was made above"
    return int(row[0])


def set_intake(db: Db, member_id: str, cursor: int, polled_at: int) -> None:
    db.run(
        "UPDATE ag2_pollers SET intake_cursor = ?, polled_at = ? WHERE member_id = ?",
        (cursor, polled_at, member_id),
    )


def add(db: Db, member_id: str, event_id: str, room_id: str, cursor: int, at: int) -> None:
    db.run(
        "INSERT INTO ag2_tasks (member_id, event_id, room_id, cursor, state, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (member_id, event_id) DO NOTHING",
        (member_id, event_id, room_id, cursor, QUEUED, at),
    )


def get(db: Db, member_id: str, event_id: str) -> Task | None:
    row = db.one(
        f"SELECT {_COLS} FROM ag2_tasks WHERE member_id = ? AND event_id = ?",
        (member_id, event_id),
    )
    return _task(row) if row else None


def open_tasks(db: Db, member_id: str) -> list[Task]:
    """The member's queued and leased tasks, oldest inbox row first."""
    rows = db.all(
        f"SELECT {_COLS} FROM ag2_tasks WHERE member_id = ? AND state IN (?, ?) ORDER BY cursor",
        (member_id, QUEUED, LEASED),
    )
    return [_task(r) for r in rows]


def open_in_room(db: Db, member_id: str, room_id: str) -> Task | None:
    """The member's served, unanswered task in the room (at most one is served per room):
    leased, or queued again after its lease ran out."""
    row = db.one(
        f"SELECT {_COLS} FROM ag2_tasks WHERE member_id = ? AND room_id = ?"
        " AND state IN (?, ?) AND attempt > 0 ORDER BY cursor LIMIT 1",
        (member_id, room_id, QUEUED, LEASED),
    )
    return _task(row) if row else None


def lease(db: Db, t: Task, attempt: int, until: int) -> None:
    db.run(
        "UPDATE ag2_tasks SET state = ?, attempt = ?, lease_until = ?, acked = 0, grace = 0"
        " WHERE member_id = ? AND event_id = ?",
        (LEASED, attempt, until, t.member_id, t.event_id),
    )


def extend(db: Db, t: Task, until: int, grace: int, acked: bool) -> None:
    db.run(
        "UPDATE ag2_tasks SET lease_until = ?, grace = ?, acked = ?"
        " WHERE member_id = ? AND event_id = ?",
        (until, grace, int(acked), t.member_id, t.event_id),
    )


def requeue(db: Db, t: Task) -> None:
    db.run(
        "UPDATE ag2_tasks SET state = ? WHERE member_id = ? AND event_id = ?",
        (QUEUED, t.member_id, t.event_id),
    )


def finish(db: Db, t: Task, state: str, at: int) -> None:
    db.run(
        "UPDATE ag2_tasks SET state = ?, done_at = ? WHERE member_id = ? AND event_id = ?",
        (state, at, t.member_id, t.event_id),
    )


def link_reply(db: Db, t: Task, reply_event: str, attempt: int) -> None:
    db.run(
        "UPDATE ag2_tasks SET reply_event = ?, reply_attempt = ?"
        " WHERE member_id = ? AND event_id = ?",
        (reply_event, attempt, t.member_id, t.event_id),
    )
