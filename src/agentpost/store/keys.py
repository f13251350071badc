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


def claim(db: Db, member_id: str, key: str, fingerprint: str, now: int) -> bool:
    """Claim (member, key) on its unique index; False when a record exists. On PostgreSQL a
    concurrent claim from another transaction waits here until that one commits or rolls
    back (DESIGN.md §3, §8). The record is finished later in the same transaction."""
    inserted = db.run(
        "INSERT INTO idempotency_keys (member_id, key, fingerprint, state, status, body,"
        " created_at) VALUES (?, ?, ?, 'claimed', 0, ?, ?)"
        " ON CONFLICT (member_id, key) DO NOTHING",
        (member_id, key, fingerprint, b"", now),
    )
    return inserted == 1


def finish(db: Db, rec: KeyRecord) -> None:
    """Store the outcome of a claimed key (same transaction as the claim)."""
    db.run(
        "UPDATE idempotency_keys SET state = ?, status = ?, body = ?, room_id = ?, event_id = ?"
        " WHERE member_id = ? AND key = ?",
        (rec.state, rec.status, rec.body, rec.room_id, rec.event_id, rec.member_id, rec.key),
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
