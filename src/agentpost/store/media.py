"""Media rows: metadata of an upload; the bytes live content-addressed on disk."""

from __future__ import annotations

from agentpost.store.engine import Db, Row
from agentpost.store.models import MediaRow

_COLS = "id, room_id, sha256, name, mime_type, size, uploader, created_at, redacted"
_READ = _COLS + ", expired_at"


def _media(row: Row) -> MediaRow:
    return MediaRow(
        id=row[0],
        room_id=row[1],
        sha256=row[2],
        name=row[3],
        mime_type=row[4],
        size=int(row[5]),
        uploader=row[6],
        created_at=int(row[7]),
        redacted=bool(row[8]),
        expired_at=None if row[9] is None else int(row[9]),
    )


def insert(db: Db, m: MediaRow, seq: int | None = None) -> None:
    """A new file of the room; `seq`: the event that uploads it (retention keeps the file as
    long as its newest carrying event stands, `used`)."""
    db.run(
        f"INSERT INTO media ({_COLS}, last_seq, last_used_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            m.id,
            m.room_id,
            m.sha256,
            m.name,
            m.mime_type,
            m.size,
            m.uploader,
            m.created_at,
            int(m.redacted),
            seq,
            m.created_at,
        ),
    )


def by_id(db: Db, media_id: str) -> MediaRow | None:
    row = db.one(f"SELECT {_READ} FROM media WHERE id = ?", (media_id,))
    return _media(row) if row else None


def by_ids(db: Db, room_id: str, ids: list[str]) -> list[MediaRow]:
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = db.all(
        f"SELECT {_READ} FROM media WHERE room_id = ? AND id IN ({marks})", (room_id, *ids)
    )
    return [_media(r) for r in rows]


def redact(db: Db, room_id: str, ids: list[str]) -> None:
    """Hide these media of the room for good: their bytes are no longer served (a redaction,
    docs/api.md "Relations")."""
    if ids:
        marks = ",".join("?" * len(ids))
        db.run(
            f"UPDATE media SET redacted = 1 WHERE room_id = ? AND id IN ({marks})",
            (room_id, *ids),
        )


def total_size(db: Db, room_id: str) -> int:
    """The bytes of the room's files still served (not redacted, not expired), each counted
    once."""
    row = db.one(
        "SELECT COALESCE(SUM(size), 0) FROM media"
        " WHERE room_id = ? AND redacted = 0 AND expired_at IS NULL",
        (room_id,),
    )
    return int(row[0]) if row else 0


def used(db: Db, room_id: str, ids: list[str], seq: int, at_ms: int) -> None:
    """The event `seq` carries these files of the room (their upload's event, or a message
    attaching them): retention keeps each as long as its newest such event stands."""
    if ids:
        marks = ",".join("?" * len(ids))
        db.run(
            f"UPDATE media SET last_seq = ?, last_used_at = ? WHERE room_id = ? AND id IN ({marks})",
            (seq, at_ms, room_id, *ids),
        )
