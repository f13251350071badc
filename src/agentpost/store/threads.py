"""Threads: rooms of kind `thread` with an owner (docs/threads.md), made at most once.

The insert leans on the unique (workspace, name) index instead of a look-first check, so two
hub processes asking at once make one room: on PostgreSQL the second insert waits for the
first transaction and then does nothing, and the caller reads the room that won.
"""

from __future__ import annotations

from agentpost.core.clock import now_ms
from agentpost.core.ids import new_id
from agentpost.store.engine import Db
from agentpost.store.models import Member

KIND = "thread"


def insert_if_absent(db: Db, workspace_id: str, name: str, owner: Member) -> bool:
    """Make thread `name` owned by `owner` (kept by id, with the name to read) unless a room
    of that name exists in the workspace; True when this call made it."""
    inserted = db.run(
        "INSERT INTO rooms (id, workspace_id, name, kind, mode, master, archived, owner,"
        " owner_id, sensitive_filter, last_seq, created_at)"
        " VALUES (?, ?, ?, ?, 'dynamic', NULL, 0, ?, ?, 0, 0, ?)"
        " ON CONFLICT (workspace_id, name) DO NOTHING",
        (new_id("rm"), workspace_id, name, KIND, owner.name, owner.id, now_ms()),
    )
    return inserted == 1
