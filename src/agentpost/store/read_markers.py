"""Read markers (docs/api.md "Read markers"): how far a member has read a room, and how many
events past that are unread for it.

Unread counts what a person would call new: the room's events past the marker that are not
relations (edits, reactions and redactions change an event already counted) and were not
sent by the member itself. It reads the `events_unread` index only, never a body."""

from __future__ import annotations

from agentpost.store.engine import Db

# How many events of {room} past {seq} are unread for {member}: the rule, in one place.
_UNREAD = (
    "SELECT COUNT(*) FROM events e WHERE e.room_id = {room} AND e.seq > {seq}"
    " AND e.relates_to IS NULL AND (e.sender_id IS NULL OR e.sender_id <> {member})"
)


def advance(db: Db, member_id: str, room_id: str, seq: int) -> None:
    """Move the member's marker in the room up to `seq`, never back (a newer marker stays,
    whichever hub process wrote it)."""
    db.run(
        "INSERT INTO read_markers (member_id, room_id, read_seq) VALUES (?, ?, ?)"
        " ON CONFLICT (member_id, room_id) DO UPDATE SET read_seq = excluded.read_seq"
        " WHERE read_markers.read_seq < excluded.read_seq",
        (member_id, room_id, seq),
    )


def of_room(db: Db, member_id: str, room_id: str) -> tuple[int, int]:
    """(read seq, unread) of the member in one room (0 and every event when never marked)."""
    row = db.one(
        "SELECT COALESCE(rm.read_seq, 0), ("
        + _UNREAD.format(room="r.id", seq="COALESCE(rm.read_seq, 0)", member="?")
        + ") FROM rooms r LEFT JOIN read_markers rm ON rm.room_id = r.id AND rm.member_id = ?"
        " WHERE r.id = ?",
        (member_id, member_id, room_id),
    )
    return (int(row[0]), int(row[1])) if row else (0, 0)


def of_member(db: Db, member_id: str) -> dict[str, tuple[int, int]]:
    """room id → (read seq, unread) for every room the member takes part in, in one query."""
    rows = db.all(
        "SELECT p.room_id, COALESCE(rm.read_seq, 0), ("
        + _UNREAD.format(room="p.room_id", seq="COALESCE(rm.read_seq, 0)", member="p.member_id")
        + ") FROM participants p LEFT JOIN read_markers rm"
        " ON rm.member_id = p.member_id AND rm.room_id = p.room_id WHERE p.member_id = ?",
        (member_id,),
    )
    return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}
