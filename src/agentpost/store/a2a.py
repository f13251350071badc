"""A2A push configs and their durable outbox (migration 0013, docs/a2a.md,
docs/architecture.md#a2a). A notification is written in the transaction of the event that
changed its task (a receipt), and leaves the outbox only when a 2xx answered it or it
expired."""

from __future__ import annotations

import msgspec

from agentpost.store.engine import Db

_CFG = (
    "task_id, id, member_id, url, token, auth_scheme, auth_credentials, base_url, created_at,"
    " secret"
)


class PushConfig(msgspec.Struct, frozen=True):
    task_id: str
    id: str
    member_id: str
    url: str
    token: str
    auth_scheme: str
    auth_credentials: str
    base_url: str
    created_at: int
    secret: str = ""  # the signing secret (migration 0017); "" for a config set before it


class Due(msgspec.Struct, frozen=True):
    """An outbox row taken for sending, with its config."""

    id: str
    attempts: int
    expires_at: int
    config: PushConfig


def put_config(db: Db, cfg: PushConfig) -> None:
    """Set a config (the same task and id again replaces it)."""
    db.run(
        f"INSERT INTO a2a_push_configs ({_CFG}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (task_id, id) DO UPDATE SET url = excluded.url, token = excluded.token,"
        " auth_scheme = excluded.auth_scheme, auth_credentials = excluded.auth_credentials,"
        " base_url = excluded.base_url, secret = excluded.secret",
        msgspec.structs.astuple(cfg),
    )


def configs(db: Db, task_id: str) -> list[PushConfig]:
    rows = db.all(f"SELECT {_CFG} FROM a2a_push_configs WHERE task_id = ? ORDER BY id", (task_id,))
    return [PushConfig(*r) for r in rows]


def delete_config(db: Db, task_id: str, config_id: str) -> bool:
    db.run("DELETE FROM a2a_push_outbox WHERE task_id = ? AND config_id = ?", (task_id, config_id))
    return (
        db.run("DELETE FROM a2a_push_configs WHERE task_id = ? AND id = ?", (task_id, config_id))
        == 1
    )


def enqueue(db: Db, task_id: str, event_id: str, now: int, ttl_ms: int) -> int:
    """One notification per config of the task, about `event_id`; how many were queued."""
    queued = 0
    for cfg in configs(db, task_id):
        queued += db.run(
            "INSERT INTO a2a_push_outbox (id, task_id, config_id, due_at, expires_at, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            (f"{task_id}.{cfg.id}.{event_id}", task_id, cfg.id, now, now + ttl_ms, now),
        )
    return queued


def next_due(db: Db) -> int | None:
    """When the soonest notification is due (ms), None when the outbox is empty."""
    row = db.one("SELECT MIN(due_at) FROM a2a_push_outbox")
    return None if row is None or row[0] is None else int(row[0])


def take_due(db: Db, now: int, lease_ms: int, limit: int) -> list[Due]:
    """Up to `limit` notifications due now, each moved `lease_ms` ahead so that no other
    sender takes it meanwhile (a sender killed mid-send leaves it due again then)."""
    lock = " FOR UPDATE SKIP LOCKED" if db.dialect == "postgres" else ""
    rows = db.all(
        "SELECT id, attempts, expires_at, task_id, config_id FROM a2a_push_outbox"
        " WHERE due_at <= ? ORDER BY due_at LIMIT ?" + lock,
        (now, limit),
    )
    out = []
    for rid, attempts, expires_at, task_id, config_id in rows:
        db.run("UPDATE a2a_push_outbox SET due_at = ? WHERE id = ?", (now + lease_ms, rid))
        cfg = db.one(
            f"SELECT {_CFG} FROM a2a_push_configs WHERE task_id = ? AND id = ?",
            (task_id, config_id),
        )
        if cfg is None:  # its config was deleted: nothing to send
            db.run("DELETE FROM a2a_push_outbox WHERE id = ?", (rid,))
            continue
        out.append(Due(str(rid), int(attempts), int(expires_at), PushConfig(*cfg)))
    return out


def sent(db: Db, notification_id: str) -> None:
    db.run("DELETE FROM a2a_push_outbox WHERE id = ?", (notification_id,))


def failed(db: Db, notification_id: str, attempts: int, due_at: int, error: str) -> None:
    db.run(
        "UPDATE a2a_push_outbox SET attempts = ?, due_at = ?, last_error = ? WHERE id = ?",
        (attempts, due_at, error[:500], notification_id),
    )


def pending(db: Db, task_id: str) -> list[tuple[str, int, str]]:
    """(id, attempts, last error) of the task's notifications not yet answered."""
    rows = db.all(
        "SELECT id, attempts, last_error FROM a2a_push_outbox WHERE task_id = ? ORDER BY id",
        (task_id,),
    )
    return [(str(r[0]), int(r[1]), str(r[2])) for r in rows]
