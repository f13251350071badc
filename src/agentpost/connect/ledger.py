"""The delivery ledger (docs/deliver.md "Ledger"): `<workspace>/deliveries.sqlite3`, WAL,
synchronous FULL, one writer per workspace (the Worker holds `worker.lock`).

Each entry: id, binding, room, worker id, per-part state (event ids), first-seen, result.
Written ahead: the first-seen entry is committed (fsync'd by FULL) before the first hub
call. Writes go through one writer thread that commits many at once (`LedgerWriter`);
an awaited write returns after its commit; the part records are queued without waiting
and commit with the next awaited write (the result's, at the latest). Reads run on
the caller's own connection, fail-closed: any error reading it is `LedgerUnavailable`
(answer `retry`), never "no entry". Bindings live here too, under the same durability rules,
with each Turn's `turn` (the nonce a request echoes to say which Turn's work it is) and every
sender that had a Turn (docs/deliver.md "Whose work it is").
Retention: entries are kept 30 days whatever their binding; at most 10,000, never dropping
one in progress or one finished less than 24 h ago.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from agentpost.connect.ledgerwriter import LedgerWriter

IN_PROGRESS = "in_progress"
FINISHED = "finished"
KEEP_SECONDS = 30 * 86400
CAP = 10_000
YOUNG_SECONDS = 86400
BUSY_MS = 5000

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS deliveries (
  id TEXT PRIMARY KEY, binding TEXT NOT NULL, room TEXT NOT NULL, worker_id TEXT NOT NULL,
  parts TEXT NOT NULL, posted TEXT NOT NULL, state TEXT NOT NULL, result TEXT,
  first_seen REAL NOT NULL, finished_at REAL
);
CREATE INDEX IF NOT EXISTS deliveries_by_first_seen ON deliveries (first_seen);
CREATE TABLE IF NOT EXISTS bindings (
  binding TEXT PRIMARY KEY, room TEXT NOT NULL, who TEXT NOT NULL, owner_tier INTEGER NOT NULL,
  export_dir TEXT NOT NULL, expires_at REAL NOT NULL, revoked INTEGER NOT NULL DEFAULT 0,
  revoked_reason TEXT
);
CREATE TABLE IF NOT EXISTS turns (
  turn TEXT PRIMARY KEY, binding TEXT NOT NULL, trigger TEXT NOT NULL, expires_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS turns_by_expiry ON turns (expires_at);
CREATE TABLE IF NOT EXISTS senders (who TEXT PRIMARY KEY, first_turn REAL NOT NULL);
"""


_SIDE = ("-wal", "-shm")


class LedgerUnavailable(Exception):
    """The ledger cannot be read or written now: every request is `retry`."""


@dataclass
class Entry:
    id: str
    binding: str
    room: str
    worker_id: str
    parts: list[dict[str, Any]]
    posted: dict[str, str] = field(default_factory=dict)  # part ("0", "notice") → event id
    state: str = IN_PROGRESS
    result: dict[str, Any] | None = None
    first_seen: float = 0.0


@dataclass
class Binding:
    binding: str
    room: str
    who: str
    owner_tier: bool
    export_dir: str
    expires_at: float
    revoked: bool = False
    revoked_reason: str | None = None


@dataclass
class IssuedTurn:
    """A Turn's `turn`: the binding it was issued with, the event that Turn served (a
    delivery's cause), and when it stops being honoured (its binding's expiry at that Turn)."""

    turn: str
    binding: str
    trigger: str
    expires_at: float


def outcome(state: str, result: str | None) -> str | None:
    """An entry's outcome as `connect status` names it: `delivered`, `final/<reason>`
    (`final/rejected`, `final/conflict`, ...), or None while it is in progress."""
    if state != FINISHED or not result:
        return None
    try:
        found = json.loads(result)
    except ValueError:
        return "unreadable"
    status = str(found.get("status", state))
    return f"{status}/{found['reason']}" if found.get("reason") else status


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._writer: LedgerWriter | None = None

    def open(self) -> None:
        """Open (once) the read connection and the writer thread's connection."""
        if self._db is not None:
            return
        try:
            # Made 0600 before SQLite opens it: its -wal and -shm take the file's mode.
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
            db = self._connect()
            db.executescript(_SCHEMA)
            columns = {r[1] for r in db.execute("PRAGMA table_info(bindings)").fetchall()}
            if "revoked_reason" not in columns:  # a ledger written before revocations said why
                db.execute("ALTER TABLE bindings ADD COLUMN revoked_reason TEXT")
            db.execute("SELECT COUNT(*) FROM deliveries").fetchone()
            writer = LedgerWriter(self._connect())
            for path in (self.path, *(self.path.with_name(self.path.name + x) for x in _SIDE)):
                if path.exists():  # an older ledger's files, made before this rule
                    path.chmod(0o600)
        except (sqlite3.Error, OSError) as exc:
            raise LedgerUnavailable(f"{self.path}: {exc}") from exc
        self._db, self._writer = db, writer

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        db.execute(f"PRAGMA busy_timeout={BUSY_MS}")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        return db

    def close(self) -> None:
        if self._writer is not None:
            self._writer.stop()
        if self._db is not None:
            self._db.close()
        self._db = self._writer = None

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            self.open()
        assert self._db is not None
        return self._db

    def _run(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """A read, on this thread's connection."""
        try:
            return self._conn().execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"{self.path}: {exc}") from exc

    def _writer_or_fail(self) -> LedgerWriter:
        self._conn()
        assert self._writer is not None
        return self._writer

    async def _write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """A write, committed (fsync'd) with whatever else is waiting when this returns."""
        try:
            return await self._writer_or_fail().run(fn)
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"{self.path}: {exc}") from exc

    def _write_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        try:
            return self._writer_or_fail().run_sync(fn)
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"{self.path}: {exc}") from exc

    # -- deliveries -------------------------------------------------------------------

    def get(self, delivery_id: str) -> Entry | None:
        rows = self._run(
            "SELECT id, binding, room, worker_id, parts, posted, state, result, first_seen"
            " FROM deliveries WHERE id = ?",
            (delivery_id,),
        )
        if not rows:
            return None
        r = rows[0]
        try:
            return Entry(
                r[0], r[1], r[2], r[3], json.loads(r[4]), json.loads(r[5]), r[6],
                json.loads(r[7]) if r[7] else None, float(r[8]),
            )
        except (ValueError, TypeError) as exc:
            raise LedgerUnavailable(f"entry {delivery_id!r} cannot be read: {exc}") from exc

    async def first_seen(self, e: Entry) -> None:
        """Write the entry ahead of any hub call (committed and fsync'd when this returns)."""
        row = (e.id, e.binding, e.room, e.worker_id, json.dumps(e.parts), IN_PROGRESS, e.first_seen)
        await self._write(
            lambda db: db.execute(
                "INSERT INTO deliveries (id, binding, room, worker_id, parts, posted, state,"
                " first_seen) VALUES (?, ?, ?, ?, ?, '{}', ?, ?)",
                row,
            )
        )

    def note_posted(self, e: Entry, part: str, event_id: str) -> None:
        """Record a posted part without waiting for its fsync. Per-part state need not be on
        disk before the next part: a Worker killed first re-posts that part under the same
        key after its restart, and the hub answers it from the key (a replay, same event).
        The finish that follows commits with it or after it."""
        e.posted[part] = event_id
        row = (json.dumps(e.posted), e.id)
        try:
            self._writer_or_fail().submit(
                lambda db: db.execute("UPDATE deliveries SET posted = ? WHERE id = ?", row)
            )
        except sqlite3.Error as exc:
            raise LedgerUnavailable(f"{self.path}: {exc}") from exc

    async def finish(self, e: Entry, result: dict[str, Any]) -> None:
        """Record a result, committed and fsync'd when this returns."""
        e.state, e.result = FINISHED, result
        row = (FINISHED, json.dumps(result), time.time(), e.id)
        await self._write(
            lambda db: db.execute(
                "UPDATE deliveries SET state = ?, result = ?, finished_at = ? WHERE id = ?", row
            )
        )

    def worker_ids(self) -> set[str]:
        return {r[0] for r in self._run("SELECT DISTINCT worker_id FROM deliveries")}

    def in_progress(self) -> list[Entry]:
        ids = [r[0] for r in self._run("SELECT id FROM deliveries WHERE state = ?", (IN_PROGRESS,))]
        return [e for e in (self.get(i) for i in ids) if e is not None]

    def recent(self, limit: int = 20) -> list[dict[str, Any]]:
        rows = self._run(
            "SELECT id, binding, room, state, result, first_seen FROM deliveries"
            " ORDER BY first_seen DESC LIMIT ?",
            (limit,),
        )
        return [
            {
                "id": r[0],
                "binding": r[1],
                "room": r[2],
                "state": r[3],
                "outcome": outcome(r[3], r[4]),
                "first_seen": r[5],
            }
            for r in rows
        ]

    def counts(self) -> dict[str, int]:
        """How many entries each outcome has (`in_progress` for those not finished), as
        `outcome` names them, counted by SQLite itself: the status file asks every 2 s, on
        the Worker's event loop, and 10,000 results parsed in Python held it ~45 ms."""
        out: dict[str, int] = {}
        rows = self._run(
            "SELECT state, done, CASE WHEN NOT done THEN NULL WHEN json_valid(result)"
            " THEN json_extract(result, '$.status') ELSE '' END,"
            " CASE WHEN done AND json_valid(result) THEN json_extract(result, '$.reason') END,"
            " COUNT(*)"
            " FROM (SELECT state, result, state = ? AND COALESCE(result, '') != '' AS done"
            " FROM deliveries) GROUP BY 1, 2, 3, 4",
            (FINISHED,),
        )
        for state, done, status, reason, n in rows:
            if not done:
                key = state
            elif status == "":
                key = "unreadable"
            else:
                status = state if status is None else str(status)
                key = f"{status}/{reason}" if reason else status
            out[key] = out.get(key, 0) + n
        return out

    def prune(self, now: float) -> int:
        """Drop entries past 30 days, then the oldest finished ones over the cap (never one in
        progress, never one finished less than 24 h ago); and every Turn's `turn` past its
        binding's life at that Turn (it is refused from then on anyway)."""

        def job(db: sqlite3.Connection) -> int:
            db.execute("DELETE FROM turns WHERE expires_at < ?", (now,))
            gone = len(
                db.execute(
                    "DELETE FROM deliveries WHERE state = ? AND first_seen < ? RETURNING id",
                    (FINISHED, now - KEEP_SECONDS),
                ).fetchall()
            )
            (count,) = db.execute("SELECT COUNT(*) FROM deliveries").fetchone()
            if count > CAP:
                gone += len(
                    db.execute(
                        "DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE"
                        " state = ? AND finished_at < ? ORDER BY first_seen LIMIT ?) RETURNING id",
                        (FINISHED, now - YOUNG_SECONDS, count - CAP),
                    ).fetchall()
                )
            return gone

        return self._write_sync(job)

    # -- bindings ---------------------------------------------------------------------

    def binding(self, binding: str) -> Binding | None:
        rows = self._run(
            "SELECT binding, room, who, owner_tier, export_dir, expires_at, revoked,"
            " revoked_reason FROM bindings WHERE binding = ?",
            (binding,),
        )
        if not rows:
            return None
        r = rows[0]
        return Binding(r[0], r[1], r[2], bool(r[3]), r[4], float(r[5]), bool(r[6]), r[7])

    def binding_for(self, room: str, who: str) -> Binding | None:
        rows = self._run(
            "SELECT binding FROM bindings WHERE room = ? AND who = ? AND revoked = 0", (room, who)
        )
        return self.binding(rows[0][0]) if rows else None

    def save_binding(self, b: Binding, turn: IssuedTurn | None = None) -> None:
        """Save a binding renewed for a Turn, with that Turn's `turn` and its sender, in one
        commit (fsync'd when this returns, before the prompt goes out)."""
        row = (b.binding, b.room, b.who, int(b.owner_tier), b.export_dir, b.expires_at, int(b.revoked))

        def job(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO bindings (binding, room, who, owner_tier, export_dir, expires_at,"
                " revoked) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (binding) DO UPDATE SET"
                " expires_at = excluded.expires_at, revoked = excluded.revoked",
                row,
            )
            db.execute(
                "INSERT OR IGNORE INTO senders (who, first_turn) VALUES (?, ?)", (b.who, time.time())
            )
            if turn is not None:
                db.execute(
                    "INSERT INTO turns (turn, binding, trigger, expires_at) VALUES (?, ?, ?, ?)",
                    (turn.turn, turn.binding, turn.trigger, turn.expires_at),
                )

        self._write_sync(job)

    def note_sender(self, who: str) -> None:
        """A sender had a Turn that got no binding (delivery paused): it still counts."""
        self._write_sync(
            lambda db: db.execute(
                "INSERT OR IGNORE INTO senders (who, first_turn) VALUES (?, ?)", (who, time.time())
            )
        )

    def senders(self) -> set[str]:
        """Everyone this Worker ever ran a Turn for (the bindings of a ledger written before
        senders were kept name them too)."""
        rows = self._run("SELECT who FROM senders UNION SELECT who FROM bindings")
        return {r[0] for r in rows}

    def turn(self, turn: str) -> IssuedTurn | None:
        rows = self._run(
            "SELECT turn, binding, trigger, expires_at FROM turns WHERE turn = ?", (turn,)
        )
        if not rows:
            return None
        r = rows[0]
        return IssuedTurn(r[0], r[1], r[2], float(r[3]))

    def revoke(self, binding: str, reason: str) -> None:
        """The hub said this binding's sender can no longer be answered there: every later
        delivery under it is `rejected` (committed and fsync'd when this returns)."""
        self._write_sync(
            lambda db: db.execute(
                "UPDATE bindings SET revoked = 1, revoked_reason = ?"
                " WHERE binding = ? AND revoked = 0",
                (reason, binding),
            )
        )

    def bindings(self) -> list[Binding]:
        names = [r[0] for r in self._run("SELECT binding FROM bindings")]
        return [b for b in (self.binding(n) for n in names) if b is not None]
