"""Search over events' text (docs/search.md): SQLite's FTS5 table `event_search` (keyed by
`events.rowid`) or PostgreSQL's `events.search` tsvector with its GIN index. Both are
written with the event (store/events.py); here they are read, only ever over the rooms a
member takes part in, newest first."""

from __future__ import annotations

from dataclasses import dataclass

from agentpost.core import search as syntax
from agentpost.store.engine import Db

_MINE = "e.room_id IN (SELECT room_id FROM participants WHERE member_id = ?)"
# An event body as PostgreSQL json. A NUL escaped in the text (which PostgreSQL text cannot
# hold) would fail the whole document, so it is read as a space; an escaped backslash is set
# aside first (as chr(1), which JSON never holds unescaped). As in migration 0005.
_PG_BODY = (
    "replace(replace(replace(convert_from(e.body, 'UTF8'), '\\\\', chr(1)),"
    " '\\u0000', ' '), chr(1), '\\\\')::json"
)


def indexed_text(text: str) -> str:
    """The text as the index holds it: a NUL (which PostgreSQL text cannot hold) is a space."""
    return text.replace("\x00", " ")


@dataclass(frozen=True)
class Filters:
    member_id: str
    room_id: str | None = None
    sender: str | None = None
    before: str | None = None  # an event id: only hits older than it
    limit: int = 20


def position(db: Db, member_id: str, event_id: str) -> int | str | None:
    """Where `event_id` sits in the newest-first order (SQLite's rowid, PostgreSQL's id),
    if it is an event in a room the member takes part in; else None."""
    col = "e.id" if db.dialect == "postgres" else "e.rowid"
    row = db.one(f"SELECT {col} FROM events e WHERE e.id = ? AND {_MINE}", (event_id, member_id))
    if row is None:
        return None
    return str(row[0]) if db.dialect == "postgres" else int(row[0])


def find(db: Db, query: syntax.Query, f: Filters, before: int | str | None) -> list[bytes]:
    """The bodies of the newest `f.limit` events matching `query` in the member's rooms,
    newest first, older than `before` (a `position`) when given."""
    if db.dialect == "postgres":
        match, params = syntax.tsquery(query)
        sql = f"SELECT e.body FROM events e WHERE e.search @@ {match} AND {_MINE}"
        args: list[object] = [*params, f.member_id]
        order = "e.id"
    else:
        sql = (
            "SELECT e.body FROM event_search s JOIN events e ON e.rowid = s.rowid"
            f" WHERE event_search MATCH ? AND {_MINE}"
        )
        args = [syntax.fts5(query), f.member_id]
        order = "s.rowid"
    if f.room_id is not None:
        sql += " AND e.room_id = ?"
        args.append(f.room_id)
    if before is not None:
        sql += f" AND {order} < ?"
        args.append(before)
    if f.sender is not None:
        sender = (
            f"{_PG_BODY} ->> 'sender'"
            if db.dialect == "postgres"
            else "json_extract(CAST(e.body AS TEXT), '$.sender')"
        )
        sql += f" AND {sender} = ?"
        args.append(f.sender)
    sql += f" ORDER BY {order} DESC LIMIT ?"
    args.append(f.limit)
    return [bytes(r[0]) for r in db.all(sql, args)]
