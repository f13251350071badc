"""Inbox rows: one per (target member, event), written with the event (docs/api.md)."""

from __future__ import annotations

import functools

from agentpost.store import events
from agentpost.store.engine import Db, Tx


def add(tx: Tx, member_ids: list[str], room_id: str, seq: int) -> None:
    """One inbox row per member, each with the member's next cursor. The cursor is taken
    under the member's row lock (so cursors commit in order per member, with any number of
    hub processes), at the end of the batch in member order (so no two writers deadlock)."""
    for mid in member_ids:
        tx.defer(
            (mid, room_id, f"{seq:020d}"),
            functools.partial(_append, member_id=mid, room_id=room_id, seq=seq),
        )


def _append(db: Db, member_id: str, room_id: str, seq: int) -> None:
    row = db.one(
        "UPDATE members SET inbox_last = inbox_last + 1 WHERE id = ? RETURNING inbox_last",
        (member_id,),
    )
    if row is None:
        return  # hard-removed in the meantime: no one to wake
    db.run(
        "INSERT INTO inbox (member_id, cursor, room_id, seq) VALUES (?, ?, ?, ?)",
        (member_id, int(row[0]), room_id, seq),
    )


def page(
    db: Db, member_id: str, after: int, limit: int, max_bytes: int | None = None
) -> events.Page:
    """(cursor, event body) of the member's inbox rows past `after` in the rooms they take
    part in now, oldest first; with `max_bytes`, only as many as fit in that many body bytes
    (always at least one)."""
    asked, cut = limit, False
    if max_bytes is not None:
        sizes = db.all(
            f"SELECT length(e.body) {_ROWS} ORDER BY i.cursor LIMIT ?", (member_id, after, limit)
        )
        limit = events.fitting(sizes, max_bytes)
        if limit == 0:
            return events.Page()
        cut = limit < len(sizes)
    rows = db.all(
        f"SELECT i.cursor, e.body {_ROWS} ORDER BY i.cursor LIMIT ?", (member_id, after, limit)
    )
    return events.paged([(int(r[0]), bytes(r[1])) for r in rows], cut or len(rows) == asked)


# Served only while the member takes part in the row's room: a wake-up queued before they
# were taken out is withdrawn, the same rule as `GET /v1/events/{id}` (docs/api.md "Inbox").
# The join is the filter, so LIMIT counts served rows only and a withdrawn row never makes
# a page short or empty while later rows wait: a reader's cursor moves past it.
_ROWS = (
    "FROM inbox i JOIN events e ON e.room_id = i.room_id AND e.seq = i.seq"
    " JOIN participants p ON p.room_id = i.room_id AND p.member_id = i.member_id"
    " WHERE i.member_id = ? AND i.cursor > ?"
)


def last_cursor(db: Db, member_id: str) -> int:
    row = db.one("SELECT inbox_last FROM members WHERE id = ?", (member_id,))
    return int(row[0]) if row else 0


def acked_row(db: Db, member_id: str, room_id: str, seq: int) -> bool:
    """Whether the event at (room_id, seq) woke the member and the member acknowledged its
    inbox past that row."""
    return (
        db.one(
            "SELECT 1 FROM inbox i JOIN members m ON m.id = i.member_id"
            " WHERE i.member_id = ? AND i.room_id = ? AND i.seq = ?"
            " AND i.cursor <= m.inbox_cursor",
            (member_id, room_id, seq),
        )
        is not None
    )


def latest_wakeup(db: Db, member_id: str) -> bytes | None:
    """The body of the event that last woke `member_id` (its newest inbox row), if it is
    still stored."""
    row = db.one(
        "SELECT e.body FROM inbox i JOIN events e ON e.room_id = i.room_id AND e.seq = i.seq"
        " WHERE i.member_id = ? ORDER BY i.cursor DESC LIMIT 1",
        (member_id,),
    )
    return bytes(row[0]) if row else None


def woke(db: Db, member_id: str, room_id: str, seq: int) -> bool:
    """Whether the event at (room_id, seq) woke `member_id` (it has an inbox row for it)."""
    return (
        db.one(
            "SELECT 1 FROM inbox WHERE member_id = ? AND room_id = ? AND seq = ?",
            (member_id, room_id, seq),
        )
        is not None
    )


def woke_agent_of(db: Db, workspace_id: str, room_id: str, seq: int) -> bool:
    """Whether the event at (room_id, seq) woke an agent member of `workspace_id`."""
    return (
        db.one(
            "SELECT 1 FROM inbox i JOIN members m ON m.id = i.member_id"
            " WHERE i.room_id = ? AND i.seq = ? AND m.kind = 'agent' AND m.workspace_id = ?"
            " LIMIT 1",
            (room_id, seq, workspace_id),
        )
        is not None
    )
