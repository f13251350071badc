"""Rooms and their participants."""

from __future__ import annotations

from agentpost.core.clock import now_ms
from agentpost.core.ids import new_id
from agentpost.store import members
from agentpost.store.engine import Db, Row
from agentpost.store.models import Member, Room

_COLS = (
    "id, workspace_id, name, kind, mode, master, archived, owner, sensitive_filter, last_seq,"
    " router, max_delegation_depth, agent_wakeups_per_minute, owner_id"
)
_N = len(_COLS.split(","))  # the columns after these in a wider row start here


def _room(row: Row) -> Room:
    return Room(
        id=row[0],
        workspace_id=row[1],
        name=row[2],
        kind=row[3],
        mode=row[4],
        master=row[5],
        archived=bool(row[6]),
        owner=row[7],
        sensitive_filter=bool(row[8]),
        last_seq=int(row[9]),
        router=row[10],
        max_delegation_depth=int(row[11]),
        agent_wakeups_per_minute=int(row[12]),
        owner_id=row[13],
    )


def create_room(
    db: Db,
    workspace_id: str,
    name: str,
    kind: str,
    mode: str,
    master: str | None,
    owner: Member | None,
    sensitive_filter: bool,
    router: str = "sole-agent",
    max_delegation_depth: int = 8,
    agent_wakeups_per_minute: int = 120,
) -> Room | None:
    """The new room, or None when the name is taken in the workspace. `owner`: the member
    who owns it (kept by id, with the name to read), if any."""
    if db.one("SELECT 1 FROM rooms WHERE workspace_id = ? AND name = ?", (workspace_id, name)):
        return None
    rid = new_id("rm")
    db.run(
        f"INSERT INTO rooms ({_COLS}, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, 0, ?, ?, ?, ?, ?)",
        (
            rid,
            workspace_id,
            name,
            kind,
            mode,
            master,
            owner.name if owner else None,
            int(sensitive_filter),
            router,
            max_delegation_depth,
            agent_wakeups_per_minute,
            owner.id if owner else None,
            now_ms(),
        ),
    )
    return Room(
        id=rid,
        workspace_id=workspace_id,
        name=name,
        kind=kind,
        mode=mode,
        master=master,
        archived=False,
        owner=owner.name if owner else None,
        sensitive_filter=sensitive_filter,
        last_seq=0,
        router=router,
        max_delegation_depth=max_delegation_depth,
        agent_wakeups_per_minute=agent_wakeups_per_minute,
        owner_id=owner.id if owner else None,
    )


def room_by_id(db: Db, room_id: str) -> Room | None:
    row = db.one(f"SELECT {_COLS} FROM rooms WHERE id = ?", (room_id,))
    return _room(row) if row else None


def room_by_name(db: Db, workspace_id: str, name: str) -> Room | None:
    row = db.one(
        f"SELECT {_COLS} FROM rooms WHERE workspace_id = ? AND name = ?", (workspace_id, name)
    )
    return _room(row) if row else None


def rooms_of_member(db: Db, member_id: str) -> list[Room]:
    rows = db.all(
        f"SELECT {', '.join('r.' + c.strip() for c in _COLS.split(','))} FROM rooms r"
        " JOIN participants p ON p.room_id = r.id WHERE p.member_id = ? ORDER BY r.name",
        (member_id,),
    )
    return [_room(r) for r in rows]


def rooms_of_workspace(db: Db, workspace_id: str) -> list[Room]:
    """Every room of the workspace, archived ones and threads too, by name."""
    rows = db.all(
        f"SELECT {_COLS} FROM rooms WHERE workspace_id = ? ORDER BY name", (workspace_id,)
    )
    return [_room(r) for r in rows]


def set_archived(db: Db, room_id: str, archived: bool) -> None:
    db.run("UPDATE rooms SET archived = ? WHERE id = ?", (int(archived), room_id))


def next_seq(db: Db, room_id: str) -> int | None:
    """Take the room's next `seq` inside the write transaction (None: no such room):
    gap-free, since a rolled-back job gives its number back with the rest of its writes
    (docs/api.md). On PostgreSQL this takes the room's row lock until commit."""
    row = db.one(
        "UPDATE rooms SET last_seq = last_seq + 1 WHERE id = ? RETURNING last_seq", (room_id,)
    )
    return int(row[0]) if row else None


def set_seqs(db: Db, last: dict[str, int]) -> None:
    """Set many rooms' `last_seq` in one statement (the batch path: the rooms' rows are
    locked already, see `lock_many`, and each value was read under that lock)."""
    db.run(
        "UPDATE rooms SET last_seq = v.column2 FROM (VALUES "
        + ", ".join(["(?, ?)"] * len(last))
        + ") AS v WHERE rooms.id = v.column1",
        [v for item in last.items() for v in item],
    )


def lock_many(db: Db, room_ids: list[str]) -> None:
    """Take many rooms' row locks in id order, the one order every writer uses
    (docs/architecture.md#store), until
    the transaction ends (PostgreSQL; SQLite's one write transaction excludes others)."""
    if db.dialect == "postgres":
        db.all("SELECT 1 FROM rooms WHERE id = ANY(?) ORDER BY id FOR UPDATE", (room_ids,))


def rooms_for_members(
    db: Db, pairs: list[tuple[str, str]]
) -> dict[tuple[str, str], tuple[Room, bool, str | None]]:
    """`room_for_member` for many (room, member) pairs in one query; pairs with no room
    are missing. Read after `lock_many` on PostgreSQL, so it sees what committed by then."""
    cols = ", ".join("r." + c.strip() for c in _COLS.split(","))
    rows = db.all(
        f"SELECT {cols}, v.column2, EXISTS (SELECT 1 FROM participants p"
        " WHERE p.room_id = r.id AND p.member_id = v.column2),"
        " (SELECT m.status FROM members m WHERE m.id = v.column2) FROM (VALUES "
        + ", ".join(["(?, ?)"] * len(pairs))
        + ") AS v JOIN rooms r ON r.id = v.column1",
        [v for pair in pairs for v in pair],
    )
    return {(row[0], row[_N]): (_room(row), bool(row[_N + 1]), row[_N + 2]) for row in rows}


def sole_agents(db: Db, room_ids: list[str]) -> dict[str, tuple[int, str, str]]:
    """Per room with live agents: (how many, the least id and name); with one agent those
    are its own (the `sole-agent` router for many rooms in one query)."""
    rows = db.all(
        "SELECT p.room_id, COUNT(*), MIN(m.id), MIN(m.name) FROM participants p"
        " JOIN members m ON m.id = p.member_id WHERE p.room_id IN ("
        + ", ".join(["?"] * len(room_ids))
        + ") AND m.kind = 'agent' AND m.status = 'active' GROUP BY p.room_id",
        room_ids,
    )
    return {r[0]: (int(r[1]), r[2], r[3]) for r in rows}


def lock(db: Db, room_id: str) -> None:
    """Hold the room's row lock until the transaction ends, so a post that takes it next
    sees this change (PostgreSQL; SQLite's one write transaction already excludes others)."""
    if db.dialect == "postgres":
        db.one("SELECT 1 FROM rooms WHERE id = ? FOR UPDATE", (room_id,))


def is_participant(db: Db, room_id: str, member_id: str) -> bool:
    return (
        db.one(
            "SELECT 1 FROM participants WHERE room_id = ? AND member_id = ?", (room_id, member_id)
        )
        is not None
    )


def add_participant(db: Db, room_id: str, member_id: str) -> bool:
    """True when the member was added, False when it already was a participant. Two hub
    processes adding the same member at once both succeed (the second does nothing)."""
    return (
        db.run(
            "INSERT INTO participants (room_id, member_id, added_at) VALUES (?, ?, ?)"
            " ON CONFLICT (room_id, member_id) DO NOTHING",
            (room_id, member_id, now_ms()),
        )
        == 1
    )


def remove_participant(db: Db, room_id: str, member_id: str) -> bool:
    return (
        db.run("DELETE FROM participants WHERE room_id = ? AND member_id = ?", (room_id, member_id))
        > 0
    )


def participant_names(db: Db, room_id: str) -> list[str]:
    """The names of the room's participants that are active members. A soft removal keeps
    the member's row and its rooms (only a hard one deletes them), but a removed member takes
    part in nothing: listed, it would read as present, and its name may belong to a new
    member by now."""
    rows = db.all(
        "SELECT m.name FROM participants p JOIN members m ON m.id = p.member_id"
        " WHERE p.room_id = ? AND m.status = 'active' ORDER BY m.name",
        (room_id,),
    )
    return [r[0] for r in rows]


def update_settings(
    db: Db,
    room_id: str,
    mode: str,
    master: str | None,
    router: str,
    sensitive_filter: bool,
    max_delegation_depth: int,
    agent_wakeups_per_minute: int,
) -> None:
    """Change how the room routes (docs/delegation.md: a human participant may)."""
    db.run(
        "UPDATE rooms SET mode = ?, master = ?, router = ?, sensitive_filter = ?,"
        " max_delegation_depth = ?, agent_wakeups_per_minute = ? WHERE id = ?",
        (
            mode,
            master,
            router,
            int(sensitive_filter),
            max_delegation_depth,
            agent_wakeups_per_minute,
            room_id,
        ),
    )


def room_for_member(db: Db, room_id: str, member_id: str) -> tuple[Room, bool, str | None] | None:
    """The room, whether the member takes part in it, and the member's status now (None:
    deleted), in one query (the post path)."""
    row = db.one(
        f"SELECT {_COLS}, EXISTS (SELECT 1 FROM participants p WHERE p.room_id = rooms.id"
        " AND p.member_id = ?), (SELECT m.status FROM members m WHERE m.id = ?)"
        " FROM rooms WHERE id = ?",
        (member_id, member_id, room_id),
    )
    return (_room(row), bool(row[_N]), row[_N + 1]) if row else None


def active_members(db: Db, room_id: str) -> list[Member]:
    """The room's participants that are active members (softly removed ones left out), by
    name (one query)."""
    rows = db.all(
        f"SELECT {members.MEMBER_COLS} FROM participants p JOIN members m ON m.id = p.member_id"
        " JOIN workspaces w ON w.id = m.workspace_id"
        " WHERE p.room_id = ? AND m.status = 'active' ORDER BY m.name",
        (room_id,),
    )
    return [members.member_of(r) for r in rows]


def live_agents(db: Db, room_id: str, limit: int = 1_000_000) -> list[Member]:
    """The room's participants that are active agents, as members, by name (one query)."""
    rows = db.all(
        f"SELECT {members.MEMBER_COLS} FROM participants p JOIN members m ON m.id = p.member_id"
        " JOIN workspaces w ON w.id = m.workspace_id"
        " WHERE p.room_id = ? AND m.kind = 'agent' AND m.status = 'active' ORDER BY m.name"
        " LIMIT ?",
        (room_id, limit),
    )
    return [members.member_of(r) for r in rows]
