"""Events: the room's gap-free log. The body is the EVENT JSON exactly as served."""

from __future__ import annotations

from agentpost.store import search
from agentpost.store.engine import Db, Row


def insert(
    db: Db,
    room_id: str,
    seq: int,
    event_id: str,
    body: bytes,
    text: str,
    relates_to: str | None = None,
    *,
    sender_id: str | None,
) -> None:
    """Store the event and index its `text` for search, in the same transaction (docs/search.md "How
    it is stored"). A relation event (`relates_to`: an edit, a reaction, a redaction) is never
    indexed: its target's latest text is (`reshow`). `sender_id` is the sending member (None: a hub
    notice), which unread counts leave out for that member (store/read_markers.py)."""
    if relates_to is not None:
        text = ""
    if db.dialect == "postgres":
        db.run(
            "INSERT INTO events (room_id, seq, id, body, search, relates_to, sender_id)"
            " VALUES (?, ?, ?, ?, to_tsvector('simple', ?), ?, ?)",
            (room_id, seq, event_id, body, search.indexed_text(text), relates_to, sender_id),
        )
        return
    db.run(
        "INSERT INTO events (room_id, seq, id, body, relates_to, sender_id)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (room_id, seq, event_id, body, relates_to, sender_id),
    )
    if text:
        # The row just inserted on this connection: its rowid keys the FTS5 row.
        db.run(
            "INSERT INTO event_search (rowid, text) VALUES (last_insert_rowid(), ?)",
            (search.indexed_text(text),),
        )


def insert_many(db: Db, rows: list[tuple[str, int, str, bytes, str, str]]) -> None:
    """`insert` for many (room_id, seq, id, body, text, sender_id): the events and their
    search index, one statement each (docs/search.md "How it is stored")."""
    marks = ", ".join(["(?, ?, ?, ?, ?)"] * len(rows))
    if db.dialect == "postgres":
        db.run(
            "INSERT INTO events (room_id, seq, id, body, sender_id, search) VALUES "
            + ", ".join(["(?, ?, ?, ?, ?, to_tsvector('simple', ?))"] * len(rows)),
            [v for r in rows for v in (*r[:4], r[5], search.indexed_text(r[4]))],
        )
        return
    made = db.all(
        f"INSERT INTO events (room_id, seq, id, body, sender_id) VALUES {marks}"
        " RETURNING id, rowid",
        [v for r in rows for v in (*r[:4], r[5])],
    )
    rowid = {str(m[0]): int(m[1]) for m in made}  # RETURNING's order is not the VALUES'
    texts = [(rowid[r[2]], search.indexed_text(r[4])) for r in rows if r[4]]
    if texts:
        db.run(
            "INSERT INTO event_search (rowid, text) VALUES " + ", ".join(["(?, ?)"] * len(texts)),
            [v for t in texts for v in t],
        )


class Page(list[tuple[int, bytes]]):
    """(position, body) rows, oldest first. `full`: the page stopped at its row limit or
    at its byte budget, so more rows may follow it (read on before waiting for news)."""

    full = False


def page(db: Db, room_id: str, after: int, limit: int, max_bytes: int | None = None) -> Page:
    """(seq, body) of the room's events with seq > after, oldest first; with `max_bytes`,
    only as many as fit in that many body bytes (always at least one)."""
    asked, cut = limit, False
    if max_bytes is not None:
        sizes = db.all(
            "SELECT length(body) FROM events WHERE room_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            (room_id, after, limit),
        )
        limit = fitting(sizes, max_bytes)
        if limit == 0:
            return Page()
        cut = limit < len(sizes)
    rows = db.all(
        "SELECT seq, body FROM events WHERE room_id = ? AND seq > ? ORDER BY seq LIMIT ?",
        (room_id, after, limit),
    )
    return paged([(int(r[0]), bytes(r[1])) for r in rows], cut or len(rows) == asked)


def paged(rows: list[tuple[int, bytes]], full: bool) -> Page:
    out = Page(rows)
    out.full = full
    return out


def fitting(sizes: list[Row], max_bytes: int) -> int:
    """How many of the leading `(size,)` rows fit in `max_bytes` together; the first one
    always does. Sizes come from `length(body)`, which reads a blob's length without its
    bytes (SQLite's record header, PostgreSQL's TOAST header), so a page of large events
    is cut before any of it is loaded."""
    total = 0
    for n, (size,) in enumerate(sizes):
        total += int(size)
        if total > max_bytes and n > 0:
            return n
    return len(sizes)


def by_id(db: Db, event_id: str) -> tuple[str, int, bytes] | None:
    """(room_id, seq, body) of one event."""
    row = db.one("SELECT room_id, seq, body FROM events WHERE id = ?", (event_id,))
    return (row[0], int(row[1]), bytes(row[2])) if row else None


def seqs_of(db: Db, room_id: str, event_ids: list[str]) -> dict[str, int]:
    """id → seq of those of `event_ids` that are events of the room."""
    if not event_ids:
        return {}
    marks = ",".join("?" * len(event_ids))
    rows = db.all(
        f"SELECT id, seq FROM events WHERE room_id = ? AND id IN ({marks})", (room_id, *event_ids)
    )
    return {str(r[0]): int(r[1]) for r in rows}


def room_of(db: Db, event_id: str) -> str | None:
    """The room an event is in (None: no such event)."""
    row = db.one("SELECT room_id FROM events WHERE id = ?", (event_id,))
    return str(row[0]) if row else None


def replace_body(db: Db, event_id: str, body: bytes) -> None:
    db.run("UPDATE events SET body = ? WHERE id = ?", (body, event_id))


def reshow(db: Db, event_id: str, body: bytes, old_text: str, new_text: str) -> None:
    """Serve `body` for the event from now on and index `new_text` in place of `old_text`
    (its text as indexed until now), in the caller's transaction: an edit re-indexes, a
    redaction (`new_text` "") leaves the index (docs/search.md)."""
    if db.dialect == "postgres":
        db.run(
            "UPDATE events SET body = ?, search = to_tsvector('simple', ?) WHERE id = ?",
            (body, search.indexed_text(new_text), event_id),
        )
        return
    row = db.one("SELECT rowid FROM events WHERE id = ?", (event_id,))
    assert row is not None, "reshow names an event the caller holds locked"
    rowid = int(row[0])
    db.run("UPDATE events SET body = ? WHERE id = ?", (body, event_id))
    # An external-content FTS5 table forgets a row only when told the text it indexed.
    if old_text:
        db.run(
            "INSERT INTO event_search (event_search, rowid, text) VALUES ('delete', ?, ?)",
            (rowid, search.indexed_text(old_text)),
        )
    if new_text:
        db.run(
            "INSERT INTO event_search (rowid, text) VALUES (?, ?)",
            (rowid, search.indexed_text(new_text)),
        )


def relations_of(db: Db, target_id: str) -> list[tuple[str, bytes]]:
    """(id, body) of the events that name `target_id` as `relates_to`, oldest first."""
    rows = db.all(
        "SELECT id, body FROM events WHERE relates_to = ? ORDER BY seq", (target_id,)
    )
    return [(str(r[0]), bytes(r[1])) for r in rows]


def lock(db: Db, event_id: str) -> tuple[str, int, bytes] | None:
    """`by_id` holding the event's row lock until the transaction ends (FOR UPDATE on
    PostgreSQL; SQLite's single write transaction already excludes every other writer)."""
    sql = "SELECT room_id, seq, body FROM events WHERE id = ?"
    if db.dialect == "postgres":
        sql += " FOR UPDATE"
    row = db.one(sql, (event_id,))
    return (row[0], int(row[1]), bytes(row[2])) if row else None
