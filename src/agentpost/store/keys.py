"""Idempotency records: (member, key) → fingerprint, state, status, stored response (§3)."""

from __future__ import annotations

from agentpost.store.engine import Db, Row
from agentpost.store.models import KeyRecord

_COLS = "member_id, key, fingerprint, state, status, body, room_id, event_id, created_at"


def _record(row: Row) -> KeyRecord:
    return KeyRecord(
        member_id=row[0],
        key=row[1],
        fingerprint=row[2],
        state=row[3],
        status=int(row[4]),
        body=bytes(row[5]),
        room_id=row[6],
        event_id=row[7],
        created_at=int(row[8]),
    )


def get(db: Db, member_id: str, key: str) -> KeyRecord | None:
    """The record of (member, key), expired or not: the caller applies the TTL."""
    row = db.one(
        f"SELECT {_COLS} FROM idempotency_keys WHERE member_id = ? AND key = ?", (member_id, key)
    )
    return _record(row) if row else None


def delete(db: Db, member_id: str, key: str) -> None:
    db.run("DELETE FROM idempotency_keys WHERE member_id = ? AND key = ?", (member_id, key))


def insert(db: Db, rec: KeyRecord) -> None:
    db.run(
        f"INSERT INTO idempotency_keys ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            rec.member_id,
            rec.key,
            rec.fingerprint,
            rec.state,
            rec.status,
            rec.body,
            rec.room_id,
            rec.event_id,
            rec.created_at,
        ),
    )


def sweep(db: Db, not_before: int, limit: int) -> int:
    """Delete up to `limit` expired records; the number deleted."""
    return db.run(
        "DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys"
        " WHERE created_at < ? LIMIT ?)"
        if db.dialect == "sqlite"
        else "DELETE FROM idempotency_keys WHERE ctid IN (SELECT ctid FROM idempotency_keys"
        " WHERE created_at < ? LIMIT ?)",
        (not_before, limit),
    )
