"""File reservations (docs/reservations.md, docs/architecture.md#leases): the rows only. The
rules (who may hold, renew or end what; overlap) live in `hub/reservations.py`."""

from __future__ import annotations

import json

from agentpost.store.engine import Db, Row
from agentpost.store.models import Reservation

_COLS = (
    "r.id, r.workspace_id, r.project, r.holder_id, m.name, r.paths, r.exclusive, r.reason,"
    " r.room_id, r.fence, r.since, r.renewed_at, r.expires_at, r.ended_at, r.ended_by"
)
_FROM = " FROM reservations r JOIN members m ON m.id = r.holder_id"


def _reservation(row: Row) -> Reservation:
    return Reservation(
        id=str(row[0]),
        workspace_id=str(row[1]),
        project=str(row[2]),
        holder_id=str(row[3]),
        holder=str(row[4]),
        paths=[str(p) for p in json.loads(str(row[5]))],
        exclusive=bool(row[6]),
        reason=str(row[7]),
        room_id=str(row[8]) if row[8] is not None else None,
        fence=int(row[9]),
        since=int(row[10]),
        renewed_at=int(row[11]),
        expires_at=int(row[12]),
        ended_at=int(row[13]) if row[13] is not None else None,
        ended_by=str(row[14]) if row[14] is not None else None,
    )


def lock_project(db: Db, workspace_id: str, project: str) -> int:
    """The project's fence, holding its row lock until the transaction ends (FOR UPDATE on
    PostgreSQL; SQLite's one write transaction already excludes every other writer). The
    row is made first if missing, so two first grants queue on one lock, never race an
    insert."""
    db.run(
        "INSERT INTO reservation_projects (workspace_id, project, fence) VALUES (?, ?, 0)"
        " ON CONFLICT (workspace_id, project) DO NOTHING",
        (workspace_id, project),
    )
    sql = "SELECT fence FROM reservation_projects WHERE workspace_id = ? AND project = ?"
    if db.dialect == "postgres":
        sql += " FOR UPDATE"
    row = db.one(sql, (workspace_id, project))
    assert row is not None
    return int(row[0])


def set_fence(db: Db, workspace_id: str, project: str, fence: int) -> None:
    db.run(
        "UPDATE reservation_projects SET fence = ? WHERE workspace_id = ? AND project = ?",
        (fence, workspace_id, project),
    )


def insert(db: Db, r: Reservation) -> None:
    db.run(
        "INSERT INTO reservations (id, workspace_id, project, holder_id, paths, exclusive,"
        " reason, room_id, fence, since, renewed_at, expires_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            r.id,
            r.workspace_id,
            r.project,
            r.holder_id,
            json.dumps(r.paths),
            1 if r.exclusive else 0,
            r.reason,
            r.room_id,
            r.fence,
            r.since,
            r.renewed_at,
            r.expires_at,
        ),
    )


def get(db: Db, reservation_id: str) -> Reservation | None:
    row = db.one(f"SELECT {_COLS}{_FROM} WHERE r.id = ?", (reservation_id,))
    return _reservation(row) if row else None


def unended(db: Db, workspace_id: str, project: str | None = None) -> list[Reservation]:
    """Reservations not marked ended (some may have lapsed, not yet swept), oldest first."""
    sql = f"SELECT {_COLS}{_FROM} WHERE r.workspace_id = ? AND r.ended_at IS NULL"
    params: tuple[object, ...] = (workspace_id,)
    if project is not None:
        sql += " AND r.project = ?"
        params = (workspace_id, project)
    return [_reservation(row) for row in db.all(sql + " ORDER BY r.fence, r.id", params)]


def of_holder(db: Db, holder_id: str) -> list[Reservation]:
    rows = db.all(
        f"SELECT {_COLS}{_FROM} WHERE r.holder_id = ? AND r.ended_at IS NULL ORDER BY r.id",
        (holder_id,),
    )
    return [_reservation(row) for row in rows]


def lapsed(db: Db, now: int, limit: int) -> list[Reservation]:
    rows = db.all(
        f"SELECT {_COLS}{_FROM} WHERE r.ended_at IS NULL AND r.expires_at <= ?"
        " ORDER BY r.expires_at LIMIT ?",
        (now, limit),
    )
    return [_reservation(row) for row in rows]


def of_lost_workers(db: Db, lost_before: int, limit: int) -> list[Reservation]:
    """Unended reservations whose holder's Worker lease (any profile's) ended after the
    reservation began and has not been live since `lost_before` (ms): released or lapsed,
    and taken by no Worker again. A holder that never ran a Worker (an agent over MCP, a
    person) has no lease row and is never among them."""
    rows = db.all(
        f"SELECT {_COLS}{_FROM} JOIN worker_leases l ON l.member_id = r.holder_id"
        " WHERE r.ended_at IS NULL AND l.fence > 0 AND l.expires_at >= r.since"
        " AND l.expires_at < ? ORDER BY r.id LIMIT ?",
        (lost_before, limit),
    )
    return [_reservation(row) for row in rows]


def renew(db: Db, reservation_id: str, renewed_at: int, expires_at: int) -> None:
    db.run(
        "UPDATE reservations SET renewed_at = ?, expires_at = ? WHERE id = ?",
        (renewed_at, expires_at, reservation_id),
    )


def end(db: Db, reservation_id: str, at: int, why: str) -> bool:
    """Mark it ended; False when it had ended already (another process got there first)."""
    n = db.run(
        "UPDATE reservations SET ended_at = ?, ended_by = ? WHERE id = ? AND ended_at IS NULL",
        (at, why, reservation_id),
    )
    return n > 0
