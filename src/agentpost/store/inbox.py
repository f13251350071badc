"""Inbox rows: one per (target member, event), written with the event (DESIGN.md §2)."""

from __future__ import annotations

from agentpost.store.engine import Db


def add(db: Db, member_ids: list[str], room_id: str, seq: int) -> None:
    """One inbox row per member, each with the member's next cursor. Members are locked in
    id order, so two transactions waking the same members cannot deadlock each other."""
    for mid in sorted(member_ids):
        row = db.one(
            "UPDATE members SET inbox_last = inbox_last + 1 WHERE id = ? RETURNING inbox_last",
            (mid,),
        )
        if row is None:
            continue  # hard-removed in the meantime: no one to wake
        db.run(
            "INSERT INTO inbox (member_id, cursor, room_id, seq) VALUES (?, ?, ?, ?)",
            (mid, int(row[0]), room_id, seq),
        )


def page(db: Db, member_id: str, after: int, limit: int) -> list[tuple[int, bytes]]:
    """(cursor, event body) of the member's inbox rows past `after`, oldest first."""
    rows = db.all(
        "SELECT i.cursor, e.body FROM inbox i JOIN events e ON e.room_id = i.room_id AND e.seq = i.seq"
        " WHERE i.member_id = ? AND i.cursor > ? ORDER BY i.cursor LIMIT ?",
        (member_id, after, limit),
    )
    return [(int(r[0]), bytes(r[1])) for r in rows]


def last_cursor(db: Db, member_id: str) -> int:
    row = db.one("SELECT inbox_last FROM members WHERE id = ?", (member_id,))
    return int(row[0]) if row else 0
