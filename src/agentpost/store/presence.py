"""Presence rows (docs/presence.md): each member's `last_seen`, in ms since the epoch.

Written only by a hub process's periodic flush (hub/presence.py), never on a request; the
newest value wins, whichever process writes it."""

from __future__ import annotations

from agentpost.store.engine import Db


def record(db: Db, seen: dict[str, int]) -> None:
    """Store each member's `last_seen` unless the row holds a newer one (another process
    saw them later). In member order, so two processes' flushes lock rows alike."""
    for member_id in sorted(seen):
        db.run(
            "INSERT INTO presence (member_id, last_seen) VALUES (?, ?)"
            " ON CONFLICT (member_id) DO UPDATE SET last_seen = excluded.last_seen"
            " WHERE presence.last_seen < excluded.last_seen",
            (member_id, seen[member_id]),
        )


def of_workspace(db: Db, workspace_id: str) -> dict[str, int]:
    """member id → stored `last_seen`, for the members of a workspace ever seen."""
    rows = db.all(
        "SELECT p.member_id, p.last_seen FROM presence p JOIN members m ON m.id = p.member_id"
        " WHERE m.workspace_id = ?",
        (workspace_id,),
    )
    return {str(r[0]): int(r[1]) for r in rows}


def of_room(db: Db, room_id: str) -> dict[str, int]:
    """member id → stored `last_seen`, for the room's participants ever seen."""
    rows = db.all(
        "SELECT p.member_id, p.last_seen FROM presence p"
        " JOIN participants r ON r.member_id = p.member_id WHERE r.room_id = ?",
        (room_id,),
    )
    return {str(r[0]): int(r[1]) for r in rows}


def of_member(db: Db, member_id: str) -> int | None:
    row = db.one("SELECT last_seen FROM presence WHERE member_id = ?", (member_id,))
    return None if row is None else int(row[0])
