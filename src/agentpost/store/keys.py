"""Idempotency records: (member, key) → fingerprint, state, status, stored response
(docs/architecture.md#one-key-one-event)."""

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


def delete_expired(db: Db, member_id: str, key: str, cutoff: int) -> None:
    """Forget (member, key)'s record if it was made before `cutoff`. Never a live one: on
    PostgreSQL another process may have renewed the key between our read of the expired
    record and this statement, which sees its commit; deleting that record would let this
    process post the same key a second time."""
    db.run(
        "DELETE FROM idempotency_keys WHERE member_id = ? AND key = ? AND created_at < ?",
        (member_id, key, cutoff),
    )


def claim(db: Db, member_id: str, key: str, fingerprint: str, now: int) -> bool:
    """Claim (member, key) on its unique index; False when a record exists. On PostgreSQL a
    concurrent claim from another transaction waits here until that one commits or rolls
    back (docs/api.md, docs/deploy.md). The record is finished later in the same transaction."""
    inserted = db.run(
        "INSERT INTO idempotency_keys (member_id, key, fingerprint, state, status, body,"
        " created_at) VALUES (?, ?, ?, 'claimed', 0, ?, ?)"
        " ON CONFLICT (member_id, key) DO NOTHING",
        (member_id, key, fingerprint, b"", now),
    )
    return inserted == 1


def claim_many(db: Db, claims: list[tuple[str, str, str, int]]) -> set[tuple[str, str]]:
    """Claim many (member, key, fingerprint, now) in one statement, in (member, key) order;
    the (member, key) pairs claimed (the others have a record: see `claim`)."""
    claims = sorted(claims)
    rows = db.all(
        "INSERT INTO idempotency_keys (member_id, key, fingerprint, state, status, body,"
        " created_at) VALUES "
        + ", ".join(["(?, ?, ?, 'claimed', 0, ?, ?)"] * len(claims))
        + " ON CONFLICT (member_id, key) DO NOTHING RETURNING member_id, key",
        [v for m, k, fp, now in claims for v in (m, k, fp, b"", now)],
    )
    return {(r[0], r[1]) for r in rows}


def unclaim_many(db: Db, pairs: list[tuple[str, str]]) -> None:
    """Give back claims this transaction made (before anything else was written for them)."""
    db.run(
        "DELETE FROM idempotency_keys WHERE state = 'claimed' AND ("
        + " OR ".join(["(member_id = ? AND key = ?)"] * len(pairs))
        + ")",
        [v for pair in pairs for v in pair],
    )


def finish_many(db: Db, recs: list[KeyRecord]) -> None:
    """`finish` for many claimed keys in one statement."""
    db.run(
        "UPDATE idempotency_keys SET state = v.column3, status = v.column4, body = v.column5,"
        " room_id = v.column6, event_id = v.column7 FROM (VALUES "
        + ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * len(recs))
        + ") AS v WHERE idempotency_keys.member_id = v.column1 AND idempotency_keys.key = v.column2",
        [
            v
            for r in recs
            for v in (r.member_id, r.key, r.state, r.status, r.body, r.room_id, r.event_id)
        ],
    )


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
