"""Worker leases (docs/architecture.md#one-worker-per-agent): one row per agent member that ever
ran a Worker. The rules (who may take, renew or release it) live in `hub/leases.py`; this module
only reads and writes the row, under its row lock on PostgreSQL."""

from __future__ import annotations

from agentpost.store.engine import Db, Row
from agentpost.store.models import Lease

_COLS = "member_id, fence, worker_id, host, pid, since, renewed_at, expires_at, released"


def _lease(row: Row) -> Lease:
    return Lease(
        member_id=str(row[0]),
        fence=int(row[1]),
        worker_id=str(row[2]),
        host=str(row[3]),
        pid=int(row[4]),
        since=int(row[5]),
        renewed_at=int(row[6]),
        expires_at=int(row[7]),
        released=bool(row[8]),
    )


def get(db: Db, member_id: str) -> Lease | None:
    row = db.one(f"SELECT {_COLS} FROM worker_leases WHERE member_id = ?", (member_id,))
    return _lease(row) if row else None


def lock(db: Db, member_id: str) -> Lease | None:
    """`get` holding the row lock until the transaction ends (FOR UPDATE on PostgreSQL;
    SQLite's single write transaction already excludes every other writer)."""
    sql = f"SELECT {_COLS} FROM worker_leases WHERE member_id = ?"
    if db.dialect == "postgres":
        sql += " FOR UPDATE"
    row = db.one(sql, (member_id,))
    return _lease(row) if row else None


def share(db: Db, member_id: str) -> Lease | None:
    """`get` holding a shared row lock until the transaction ends (FOR SHARE on
    PostgreSQL), so a concurrent `lock` (a take) waits for the reader to commit."""
    sql = f"SELECT {_COLS} FROM worker_leases WHERE member_id = ?"
    if db.dialect == "postgres":
        sql += " FOR SHARE"
    row = db.one(sql, (member_id,))
    return _lease(row) if row else None


def of_workspace(db: Db, workspace_id: str) -> dict[str, Lease]:
    rows = db.all(
        f"SELECT {', '.join('l.' + c.strip() for c in _COLS.split(','))}"
        " FROM worker_leases l JOIN members m ON m.id = l.member_id WHERE m.workspace_id = ?",
        (workspace_id,),
    )
    return {str(r[0]): _lease(r) for r in rows}


def of_room(db: Db, room_id: str) -> dict[str, Lease]:
    """member id → lease, for the room's participants that ever ran a Worker."""
    rows = db.all(
        f"SELECT {', '.join('l.' + c.strip() for c in _COLS.split(','))}"
        " FROM worker_leases l JOIN participants p ON p.member_id = l.member_id"
        " WHERE p.room_id = ?",
        (room_id,),
    )
    return {str(r[0]): _lease(r) for r in rows}


def put(db: Db, lease: Lease) -> None:
    """Overwrite the member's lease row (taken under `lock`, after `ensure_row`)."""
    db.run(
        f"INSERT INTO worker_leases ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (member_id) DO UPDATE SET fence = excluded.fence,"
        " worker_id = excluded.worker_id, host = excluded.host, pid = excluded.pid,"
        " since = excluded.since, renewed_at = excluded.renewed_at,"
        " expires_at = excluded.expires_at, released = excluded.released",
        (
            lease.member_id,
            lease.fence,
            lease.worker_id,
            lease.host,
            lease.pid,
            lease.since,
            lease.renewed_at,
            lease.expires_at,
            1 if lease.released else 0,
        ),
    )


def ensure_row(db: Db, member_id: str, at: int) -> None:
    """A placeholder row (fence 0, lapsed) so the row lock exists before anyone holds it:
    two first takes at once then queue on the same lock instead of racing an insert."""
    db.run(
        f"INSERT INTO worker_leases ({_COLS}) VALUES (?, 0, '', '', 0, ?, ?, ?, 1)"
        " ON CONFLICT (member_id) DO NOTHING",
        (member_id, at, at, at),
    )


def renew(db: Db, member_id: str, renewed_at: int, expires_at: int) -> None:
    db.run(
        "UPDATE worker_leases SET renewed_at = ?, expires_at = ? WHERE member_id = ?",
        (renewed_at, expires_at, member_id),
    )


def release(db: Db, member_id: str, at: int) -> None:
    db.run(
        "UPDATE worker_leases SET released = 1, expires_at = ? WHERE member_id = ?",
        (at, member_id),
    )
