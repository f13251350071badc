"""Retention rows (docs/operations.md "Retention"): the settings of workspaces and rooms, the
rooms the sweep has work in, what still needs an event or a file, and the marks the sweep
leaves (the room's `retention_seq`, held events, expired media)."""

from __future__ import annotations

from dataclasses import dataclass

from agentpost.store.engine import Db

# DONE in store/ag2.py: a task no longer in progress.
_AG2_DONE = "done"


@dataclass(frozen=True, slots=True)
class Kept:
    """How long a room keeps its events and its files, in seconds (None: for ever)."""

    room_id: str
    events: int | None
    media: int | None
    retention_seq: int


def _forever(value: object) -> int | None:
    return int(value) if value is not None and int(value) > 0 else None  # type: ignore[call-overload]


def set_workspace(db: Db, workspace_id: str, events: int | None, media: int | None) -> None:
    db.run(
        "UPDATE workspaces SET events_seconds = ?, media_seconds = ? WHERE id = ?",
        (events, media, workspace_id),
    )


def set_room(db: Db, room_id: str, events: int | None, media: int | None) -> None:
    db.run(
        "UPDATE rooms SET events_seconds = ?, media_seconds = ? WHERE id = ?",
        (events, media, room_id),
    )


def of_workspace(db: Db, workspace_id: str) -> tuple[int | None, int | None]:
    row = db.one(
        "SELECT events_seconds, media_seconds FROM workspaces WHERE id = ?", (workspace_id,)
    )
    return (None, None) if row is None else (row[0], row[1])


def of_room(db: Db, room_id: str) -> tuple[int | None, int | None, int | None, int | None]:
    """(the room's own events and media settings, then the ones in effect: the room's, else
    its workspace's; None for ever)."""
    row = db.one(
        "SELECT r.events_seconds, r.media_seconds, w.events_seconds, w.media_seconds"
        " FROM rooms r JOIN workspaces w ON w.id = r.workspace_id WHERE r.id = ?",
        (room_id,),
    )
    if row is None:
        return None, None, None, None
    own_events, own_media, ws_events, ws_media = row
    return (
        own_events,
        own_media,
        _forever(ws_events if own_events is None else own_events),
        _forever(ws_media if own_media is None else own_media),
    )


def rooms_to_sweep(db: Db) -> list[Kept]:
    """Every room with a limit on its events or its files, by its own settings or its
    workspace's."""
    rows = db.all(
        "SELECT r.id, COALESCE(r.events_seconds, w.events_seconds),"
        " COALESCE(r.media_seconds, w.media_seconds), r.retention_seq"
        " FROM rooms r JOIN workspaces w ON w.id = r.workspace_id"
        " WHERE COALESCE(r.events_seconds, w.events_seconds) > 0"
        " OR COALESCE(r.media_seconds, w.media_seconds) > 0",
    )
    return [Kept(r[0], _forever(r[1]), _forever(r[2]), int(r[3])) for r in rows]


def claim_room(db: Db, room_id: str) -> int:
    """Lock the room's row for this sweep step (another hub process sweeps it after us) and
    read how far its events are swept."""
    db.run("UPDATE rooms SET retention_seq = retention_seq WHERE id = ?", (room_id,))
    row = db.one("SELECT retention_seq FROM rooms WHERE id = ?", (room_id,))
    return int(row[0]) if row else 0


def next_events(db: Db, room_id: str, after: int, limit: int) -> list[tuple[int, str, bytes]]:
    rows = db.all(
        "SELECT seq, id, body FROM events WHERE room_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (room_id, after, limit),
    )
    return [(int(r[0]), r[1], bytes(r[2])) for r in rows]


def held_events(db: Db, room_id: str, limit: int) -> list[tuple[int, str, bytes]]:
    rows = db.all(
        "SELECT e.seq, e.id, e.body FROM retention_held h JOIN events e"
        " ON e.room_id = h.room_id AND e.seq = h.seq WHERE h.room_id = ? ORDER BY h.seq LIMIT ?",
        (room_id, limit),
    )
    return [(int(r[0]), r[1], bytes(r[2])) for r in rows]


def hold(db: Db, room_id: str, seq: int) -> None:
    db.run(
        "INSERT INTO retention_held (room_id, seq) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (room_id, seq),
    )


def release(db: Db, room_id: str, seq: int) -> None:
    db.run("DELETE FROM retention_held WHERE room_id = ? AND seq = ?", (room_id, seq))


def advance(db: Db, room_id: str, seq: int) -> None:
    db.run("UPDATE rooms SET retention_seq = ? WHERE id = ?", (seq, room_id))


def needed(db: Db, room_id: str, seq: int, event_id: str) -> bool:
    """Something still needs this event whole: an active member's inbox item not yet
    acknowledged, a delegation still waiting for a receipt, an AG2 task in progress."""
    if db.one(
        "SELECT 1 FROM inbox i JOIN members m ON m.id = i.member_id WHERE i.room_id = ?"
        " AND i.seq = ? AND i.acked_at IS NULL AND m.status = 'active' LIMIT 1",
        (room_id, seq),
    ):
        return True
    if db.one(
        "SELECT 1 FROM receipts WHERE event_id = ? AND terminal_event IS NULL LIMIT 1",
        (event_id,),
    ):
        return True
    return bool(
        db.one(
            "SELECT 1 FROM ag2_tasks WHERE event_id = ? AND state <> ? LIMIT 1",
            (event_id, _AG2_DONE),
        )
    )


def awaiting_answer(
    db: Db, room_id: str, event_id: str, member_ids: list[str], names: list[str]
) -> bool:
    """A delegation still waits for one of the agents it named (by id; by name for one
    stored before ids): an active member of the room with no terminal receipt to it. One
    who left the room, or was removed, is waited for no longer."""
    if member_ids:
        marks, who = ", ".join("?" for _ in member_ids), "m.id"
        named: list[str] = member_ids
    elif names:
        marks, who = ", ".join("?" for _ in names), "m.name"
        named = names
    else:
        return False
    return bool(
        db.one(
            "SELECT 1 FROM members m JOIN participants p ON p.member_id = m.id"
            f" WHERE p.room_id = ? AND {who} IN ({marks}) AND m.status = 'active'"
            " AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.event_id = ?"
            " AND r.replier = m.name AND r.terminal_event IS NOT NULL) LIMIT 1",
            (room_id, *named, event_id),
        )
    )


def unacked_bodies(db: Db, room_id: str, limit: int) -> list[bytes]:
    """The bodies of the room's events an active member has not acknowledged yet (their
    files are still needed)."""
    rows = db.all(
        "SELECT DISTINCT e.body FROM inbox i JOIN members m ON m.id = i.member_id"
        " JOIN events e ON e.room_id = i.room_id AND e.seq = i.seq"
        " WHERE i.room_id = ? AND i.acked_at IS NULL AND m.status = 'active' LIMIT ?",
        (room_id, limit),
    )
    return [bytes(r[0]) for r in rows]


def old_media(db: Db, room_id: str, before_ms: int, limit: int) -> list[tuple[str, str]]:
    """(id, sha256) of the room's files last uploaded or attached before `before_ms` and not
    expired yet."""
    rows = db.all(
        "SELECT id, sha256 FROM media WHERE room_id = ? AND created_at < ?"
        " AND COALESCE(last_used_at, created_at) < ? AND expired_at IS NULL"
        " ORDER BY created_at LIMIT ?",
        (room_id, before_ms, before_ms, limit),
    )
    return [(r[0], r[1]) for r in rows]


def expire_media(
    db: Db, room_id: str, ids: list[str], at_ms: int, upto_seq: int | None = None
) -> list[str]:
    """Mark these files of the room expired; the sha256 of each one marked now. With
    `upto_seq` (an event at that seq expires), only the files no later event carries."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    later = "" if upto_seq is None else " AND (last_seq IS NULL OR last_seq <= ?)"
    extra = () if upto_seq is None else (upto_seq,)
    where = f"room_id = ? AND id IN ({marks}) AND expired_at IS NULL{later}"
    rows = db.all(f"SELECT sha256 FROM media WHERE {where}", (room_id, *ids, *extra))
    db.run(f"UPDATE media SET expired_at = ? WHERE {where}", (at_ms, room_id, *ids, *extra))
    return [r[0] for r in rows]


def still_named(db: Db, sha256: str) -> bool:
    """A media row that may still be served names these bytes."""
    return bool(
        db.one(
            "SELECT 1 FROM media WHERE sha256 = ? AND expired_at IS NULL AND redacted = 0 LIMIT 1",
            (sha256,),
        )
    )


def expired_at(db: Db, media_id: str) -> int | None:
    row = db.one("SELECT expired_at FROM media WHERE id = ?", (media_id,))
    return None if row is None or row[0] is None else int(row[0])


def floor_of(db: Db, room_id: str) -> tuple[int, int]:
    """(floor_seq, retention_seq) of the room."""
    row = db.one("SELECT floor_seq, retention_seq FROM rooms WHERE id = ?", (room_id,))
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def compactable(db: Db, room_id: str, floor: int, upto: int, before_id: str) -> int:
    """The highest seq in (floor, upto] such that every event from floor+1 to it is a
    tombstone made from an event older than `before_id`, none held; `floor` when none."""
    held = db.one(
        "SELECT MIN(seq) FROM retention_held WHERE room_id = ? AND seq > ?", (room_id, floor)
    )
    if held and held[0] is not None:
        upto = min(upto, int(held[0]) - 1)
    row = db.one(
        "SELECT MIN(seq) FROM events WHERE room_id = ? AND seq > ? AND seq <= ? AND id >= ?",
        (room_id, floor, upto, before_id),
    )
    if row and row[0] is not None:
        upto = min(upto, int(row[0]) - 1)
    return max(floor, upto)


def compact(db: Db, room_id: str, floor: int, new_floor: int) -> int:
    """Remove the room's events in (floor, new_floor] (tombstones) and what named them:
    inbox items, answers, receipts, AG2 tasks, A2A push configs and notifications; the
    room's floor moves to `new_floor`. Their count."""
    ids = [
        r[0]
        for r in db.all(
            "SELECT id FROM events WHERE room_id = ? AND seq > ? AND seq <= ?",
            (room_id, floor, new_floor),
        )
    ]
    if ids:
        marks = ",".join("?" * len(ids))
        for sql in (
            f"DELETE FROM answers WHERE event_id IN ({marks})",
            f"DELETE FROM receipts WHERE event_id IN ({marks})",
            f"DELETE FROM ag2_tasks WHERE event_id IN ({marks})",
            # an A2A task is its event (hub/a2a/tasks.py)
            f"DELETE FROM a2a_push_outbox WHERE task_id IN ({marks})",
            f"DELETE FROM a2a_push_configs WHERE task_id IN ({marks})",
        ):
            db.run(sql, tuple(ids))
    db.run(
        "DELETE FROM inbox WHERE room_id = ? AND seq > ? AND seq <= ?", (room_id, floor, new_floor)
    )
    db.run(
        "DELETE FROM events WHERE room_id = ? AND seq > ? AND seq <= ?", (room_id, floor, new_floor)
    )
    db.run("UPDATE rooms SET floor_seq = ? WHERE id = ?", (new_floor, room_id))
    return len(ids)


def forget_media(db: Db, room_id: str, expired_before_ms: int, limit: int) -> int:
    """Remove the rows of files that expired before then (their bytes went already)."""
    rows = db.all(
        "SELECT id FROM media WHERE room_id = ? AND expired_at IS NOT NULL AND expired_at < ?"
        " LIMIT ?",
        (room_id, expired_before_ms, limit),
    )
    if rows:
        marks = ",".join("?" * len(rows))
        db.run(f"DELETE FROM media WHERE id IN ({marks})", tuple(r[0] for r in rows))
    return len(rows)


def forget_done_ag2_tasks(db: Db, done_before_ms: int, limit: int) -> int:
    """Remove AG2 tasks finished before then (a finished task is only looked up while its
    Worker may still ask about it: for the key lifetime)."""
    rows = db.all(
        "SELECT member_id, event_id FROM ag2_tasks WHERE state = ? AND done_at < ? LIMIT ?",
        (_AG2_DONE, done_before_ms, limit),
    )
    for member_id, event_id in rows:
        db.run("DELETE FROM ag2_tasks WHERE member_id = ? AND event_id = ?", (member_id, event_id))
    return len(rows)


def expired_hashes(db: Db) -> list[str]:
    """The bytes of every expired file: those no kept row names may still be on disk (a hub
    killed between expiring a file and freeing its bytes)."""
    return [
        str(r[0]) for r in db.all("SELECT DISTINCT sha256 FROM media WHERE expired_at IS NOT NULL")
    ]
