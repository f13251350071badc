"""Inbox rows: one per (target member, event), written with the event (DESIGN.md §2)."""

from __future__ import annotations

from agentpost.store.engine import Db


def add(db: Db, member_ids: list[str], room_id: str, seq: int) -> None:
    for mid in member_ids:
        db.run("INSERT INTO inbox (member_id, room_id, seq) VALUES (?, ?, ?)", (mid, room_id, seq))


def page(db: Db, member_id: str, after: int, limit: int) -> list[tuple[int, bytes]]:
    """(cursor, event body) of the member's inbox rows past `after`, oldest first."""
    rows = db.all(
        "SELECT i.cursor, e.body FROM inbox i JOIN events e ON e.room_id = i.room_id AND e.seq = i.seq"
        " WHERE i.member_id = ? AND i.cursor > ? ORDER BY i.cursor LIMIT ?",
        (member_id, after, limit),
    )
    return [(int(r[0]), bytes(r[1])) for r in rows]


def last_cursor(db: Db, member_id: str) -> int:
    row = db.one("SELECT MAX(cursor) FROM inbox WHERE member_id = ?", (member_id,))
    return int(row[0]) if row and row[0] is not None else 0
