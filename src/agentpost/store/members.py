"""Workspaces, members and their tokens (stored hashed)."""

from __future__ import annotations

from agentpost.core.clock import now_ms
from agentpost.core.ids import new_id
from agentpost.store.engine import Db, Row
from agentpost.store.models import Member, Workspace

MEMBER_COLS = (
    "m.id, m.workspace_id, w.name, m.name, m.kind, m.status, m.owner, m.inbox_cursor, m.owner_id"
)


def member_of(row: Row) -> Member:
    return Member(
        id=row[0],
        workspace_id=row[1],
        workspace_name=row[2],
        name=row[3],
        kind=row[4],
        status=row[5],
        owner=row[6],
        inbox_cursor=int(row[7]),
        owner_id=row[8],
    )


def create_workspace(db: Db, name: str) -> Workspace | None:
    """The new workspace, or None when the name is taken."""
    if db.one("SELECT 1 FROM workspaces WHERE name = ?", (name,)):
        return None
    ws = Workspace(id=new_id("ws"), name=name)
    db.run(
        "INSERT INTO workspaces (id, name, created_at) VALUES (?, ?, ?)", (ws.id, name, now_ms())
    )
    return ws


def workspace_by_name(db: Db, name: str) -> Workspace | None:
    row = db.one("SELECT id, name FROM workspaces WHERE name = ?", (name,))
    return Workspace(id=row[0], name=row[1]) if row else None


def workspace_name(db: Db, workspace_id: str) -> str:
    row = db.one("SELECT name FROM workspaces WHERE id = ?", (workspace_id,))
    return str(row[0]) if row else ""


def list_workspaces(db: Db) -> list[Workspace]:
    return [
        Workspace(id=r[0], name=r[1])
        for r in db.all("SELECT id, name FROM workspaces ORDER BY name")
    ]


def create_member(
    db: Db, ws: Workspace, name: str, kind: str, owner: Member | None
) -> Member | None:
    """The new active member, or None when the name is taken in the workspace."""
    if db.one("SELECT 1 FROM members WHERE workspace_id = ? AND name = ?", (ws.id, name)):
        return None
    mid = new_id("mb")
    owner_name, owner_id = (owner.name, owner.id) if owner is not None else (None, None)
    db.run(
        "INSERT INTO members (id, workspace_id, name, kind, status, owner, owner_id,"
        " inbox_cursor, created_at) VALUES (?, ?, ?, ?, 'active', ?, ?, 0, ?)",
        (mid, ws.id, name, kind, owner_name, owner_id, now_ms()),
    )
    return Member(
        id=mid,
        workspace_id=ws.id,
        workspace_name=ws.name,
        name=name,
        kind=kind,
        status="active",
        owner=owner_name,
        inbox_cursor=0,
        owner_id=owner_id,
    )


def owned_agents(db: Db, member_id: str) -> list[str]:
    """The ids of the members `member_id` owns."""
    return [str(r[0]) for r in db.all("SELECT id FROM members WHERE owner_id = ?", (member_id,))]


def set_owner(db: Db, member_id: str, owner: Member | None) -> None:
    """The agent's owner from now on (None: no one), by id; the name is kept for reading."""
    db.run(
        "UPDATE members SET owner = ?, owner_id = ? WHERE id = ?",
        (owner.name if owner else None, owner.id if owner else None, member_id),
    )


def add_token(db: Db, member_id: str, hashed: str) -> None:
    db.run(
        "INSERT INTO tokens (hash, member_id, created_at) VALUES (?, ?, ?)",
        (hashed, member_id, now_ms()),
    )


def replace_tokens(db: Db, member_id: str, hashed: str) -> None:
    """The member's only token from now on: every older one stops working."""
    db.run("DELETE FROM tokens WHERE member_id = ?", (member_id,))
    add_token(db, member_id, hashed)


def held_tokens(db: Db, pairs: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """Those of the (member id, token hash) pairs whose token is still the member's."""
    rows = db.all(
        "SELECT member_id, hash FROM tokens WHERE hash IN (" + ", ".join(["?"] * len(pairs)) + ")",
        [hashed for _member, hashed in pairs],
    )
    return {(r[0], r[1]) for r in rows} & set(pairs)


def list_members(db: Db, workspace_id: str) -> list[Member]:
    """Every member of the workspace (removed ones too, with their status), by name."""
    rows = db.all(
        f"SELECT {MEMBER_COLS} FROM members m JOIN workspaces w ON w.id = m.workspace_id"
        " WHERE m.workspace_id = ? ORDER BY m.name",
        (workspace_id,),
    )
    return [member_of(r) for r in rows]


def member_by_token(db: Db, hashed: str) -> Member | None:
    row = db.one(
        f"SELECT {MEMBER_COLS} FROM tokens t JOIN members m ON m.id = t.member_id"
        " JOIN workspaces w ON w.id = m.workspace_id WHERE t.hash = ?",
        (hashed,),
    )
    return member_of(row) if row else None


def member_by_name(db: Db, workspace_id: str, name: str) -> Member | None:
    row = db.one(
        f"SELECT {MEMBER_COLS} FROM members m JOIN workspaces w ON w.id = m.workspace_id"
        " WHERE m.workspace_id = ? AND m.name = ?",
        (workspace_id, name),
    )
    return member_of(row) if row else None


def live_members_named(db: Db, workspace_id: str, names: list[str]) -> list[Member]:
    """Active members of the workspace whose names are in `names`."""
    if not names:
        return []
    marks = ",".join("?" * len(names))
    rows = db.all(
        f"SELECT {MEMBER_COLS} FROM members m JOIN workspaces w ON w.id = m.workspace_id"
        f" WHERE m.workspace_id = ? AND m.status = 'active' AND m.name IN ({marks})",
        (workspace_id, *names),
    )
    return [member_of(r) for r in rows]


def remove_member(db: Db, member_id: str, hard: bool) -> None:
    """Soft: status removed, row and tokens kept (so the hub can say `agent_removed`).
    Hard: the member, its tokens, participations, inbox, presence and read markers are
    deleted, and what it owned is owned by no one (docs/architecture.md#identity): its agents have
    no owner until an admin names one, its rooms and threads none, so a member who takes the
    freed name later inherits nothing."""
    if hard:
        db.run("UPDATE members SET owner = NULL, owner_id = NULL WHERE owner_id = ?", (member_id,))
        db.run("UPDATE rooms SET owner = NULL, owner_id = NULL WHERE owner_id = ?", (member_id,))
        # Keep the token hashes as tombstones: the hub can still say "removed" (403).
        db.run(
            "INSERT INTO token_tombstones (hash, name, kind, removed_at)"
            " SELECT t.hash, m.name, m.kind, ? FROM tokens t JOIN members m ON m.id = t.member_id"
            " WHERE t.member_id = ? ON CONFLICT (hash) DO NOTHING",
            (now_ms(), member_id),
        )
        db.run("DELETE FROM tokens WHERE member_id = ?", (member_id,))
        db.run("DELETE FROM participants WHERE member_id = ?", (member_id,))
        db.run("DELETE FROM inbox WHERE member_id = ?", (member_id,))
        db.run("DELETE FROM presence WHERE member_id = ?", (member_id,))
        db.run("DELETE FROM read_markers WHERE member_id = ?", (member_id,))
        db.run("DELETE FROM members WHERE id = ?", (member_id,))
    else:
        db.run("UPDATE members SET status = 'removed' WHERE id = ?", (member_id,))


def set_inbox_cursor(db: Db, member_id: str, cursor: int) -> None:
    """Advance (never rewind) the member's acknowledged inbox cursor."""
    db.run(
        "UPDATE members SET inbox_cursor = ? WHERE id = ? AND inbox_cursor < ?",
        (cursor, member_id, cursor),
    )


def inbox_cursor(db: Db, member_id: str) -> int:
    row = db.one("SELECT inbox_cursor FROM members WHERE id = ?", (member_id,))
    return int(row[0]) if row else 0


def tombstone(db: Db, hashed: str) -> tuple[str, str] | None:
    """(name, kind) of the hard-removed member a token belonged to."""
    row = db.one("SELECT name, kind FROM token_tombstones WHERE hash = ?", (hashed,))
    return (row[0], row[1]) if row else None


def status(db: Db, member_id: str) -> str | None:
    """`active` or `removed`; None when the member was deleted."""
    row = db.one("SELECT status FROM members WHERE id = ?", (member_id,))
    return str(row[0]) if row else None


def member_by_id(db: Db, member_id: str) -> Member | None:
    row = db.one(
        f"SELECT {MEMBER_COLS} FROM members m JOIN workspaces w ON w.id = m.workspace_id"
        " WHERE m.id = ?",
        (member_id,),
    )
    return member_of(row) if row else None


def token_hashes(db: Db, member_id: str) -> list[str]:
    """The stored hashes of the member's live tokens (none once it is hard-removed)."""
    return [str(r[0]) for r in db.all("SELECT hash FROM tokens WHERE member_id = ?", (member_id,))]
