"""Delivery state of inbox rows (docs/delivery.md): when a row was handed to its member's
client (`read_at`) and when their cursor passed it (`acked_at`). Written once per page
handed out and once per ack, never per event on the post path."""

from __future__ import annotations

from typing import NamedTuple

from agentpost.store.engine import Db


def mark_read(db: Db, member_id: str, after: int, upto: int, at_ms: int) -> None:
    """The member's rows with cursor in (after, upto] were handed to their client: those
    of rooms they take part in (the others were withdrawn, store/inbox.py, and not handed)."""
    db.run(
        "UPDATE inbox SET read_at = ? WHERE member_id = ? AND cursor > ? AND cursor <= ?"
        " AND read_at IS NULL AND EXISTS (SELECT 1 FROM participants p"
        " WHERE p.room_id = inbox.room_id AND p.member_id = inbox.member_id)",
        (at_ms, member_id, after, upto),
    )


def mark_acked(db: Db, member_id: str, after: int, upto: int, at_ms: int) -> None:
    """The member's cursor moved from `after` to `upto`."""
    db.run(
        "UPDATE inbox SET acked_at = ? WHERE member_id = ? AND cursor > ? AND cursor <= ?"
        " AND acked_at IS NULL",
        (at_ms, member_id, after, upto),
    )


class TargetRow(NamedTuple):
    member: str
    kind: str
    status: str
    cursor: int  # the event's inbox cursor for this member
    acked_cursor: int  # the member's acknowledged cursor
    read_at: int | None
    acked_at: int | None


def targets(db: Db, room_id: str, seq: int) -> list[TargetRow]:
    """The inbox rows of the event `(room_id, seq)` with their members, by member name."""
    rows = db.all(
        "SELECT m.name, m.kind, m.status, i.cursor, m.inbox_cursor, i.read_at, i.acked_at"
        " FROM inbox i JOIN members m ON m.id = i.member_id"
        " WHERE i.room_id = ? AND i.seq = ? ORDER BY m.name",
        (room_id, seq),
    )
    return [
        TargetRow(
            str(r[0]),
            str(r[1]),
            str(r[2]),
            int(r[3]),
            int(r[4]),
            None if r[5] is None else int(r[5]),
            None if r[6] is None else int(r[6]),
        )
        for r in rows
    ]


def receipts_of(db: Db, event_id: str) -> dict[str, tuple[str | None, int]]:
    """For a delegation: replier → (event id that took its terminal slot or None,
    needs_input count)."""
    rows = db.all(
        "SELECT replier, terminal_event, needs_input FROM receipts WHERE event_id = ?",
        (event_id,),
    )
    return {str(r[0]): (r[1], int(r[2])) for r in rows}


def answers_of(db: Db, event_id: str) -> dict[str, str | None]:
    """For a person's event: replier → the event that answered it (None: from before the
    answering event was recorded)."""
    rows = db.all("SELECT replier, answer_event FROM answers WHERE event_id = ?", (event_id,))
    return {str(r[0]): r[1] for r in rows}
