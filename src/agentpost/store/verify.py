"""`agentpost db verify`: check a data home and say what is wrong, changing nothing
(docs/architecture.md#operations, docs/operations.md "Checking").

The checks, each named in what it reports:
- `integrity`: SQLite's `integrity_check` and `foreign_key_check` (PostgreSQL checks its
  own pages);
- `schema`: the applied versions, none newer than this agentpost, none skipped;
- `seqs`: every room's events numbered F+1..N with no gap, N its `last_seq`, F its
  `floor_seq` (0 unless retention removed tombstones);
- `events`: every event body is the JSON of that event (its id, room and seq);
- `media`: every media row a download may ask for (not redacted, not expired) has its bytes,
  of its size and its sha256;
- `keys`: every idempotency record well-formed (a known state, a status that goes with it,
  the response body of a finished one readable JSON);
- `inbox`: every inbox item names an event that exists, within its member's cursor range;
- `tokens`: every token belongs to a member.
Notes (not problems): blobs no media row names, a schema older than this agentpost's.
All reads run in one read transaction (one snapshot), while the hub may serve.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from agentpost.core.errors import Code
from agentpost.store import migrate
from agentpost.store.datastore import OpsError, Store, hash_file, pg_connect

Query = Callable[[str, tuple[Any, ...]], list[tuple[Any, ...]]]
_STATES = {"claimed": (0, 0), "created": (200, 299), "rejected": (400, 499)}
_BATCH = 5000
_MAX_LISTED = 50  # problems listed per check; the count says how many there were


@dataclass
class Report:
    problems: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    _per_check: dict[str, int] = field(default_factory=dict)

    def problem(self, check: str, message: str) -> None:
        n = self._per_check.get(check, 0) + 1
        self._per_check[check] = n
        if n <= _MAX_LISTED:
            self.problems.append({"check": check, "message": message})
        elif n == _MAX_LISTED + 1:
            self.problems.append({"check": check, "message": "… and more of the same"})

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "problems": self.problems,
            "problem_counts": dict(self._per_check),
            "notes": self.notes,
            "counts": self.counts,
        }


@contextmanager
def _reader(store: Store) -> Iterator[Query]:
    if store.engine == "sqlite":
        path = store.sqlite_path
        if not path.is_file():
            raise OpsError(Code.NOT_FOUND, f"no hub database at {path}")
        # With no -wal file no hub is serving it: `immutable` reads it without making the
        # -wal and -shm files a read-only open would leave behind. A served one is read in
        # a read transaction, beside the hub.
        served = path.with_name(path.name + "-wal").exists()
        mode = "mode=ro" if served else "mode=ro&immutable=1"
        conn = sqlite3.connect(f"file:{quote(str(path))}?{mode}", uri=True, timeout=30)
        try:
            conn.execute("BEGIN")  # one snapshot for every check

            def lite(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
                return conn.execute(sql, params).fetchall()

            yield lite
        except sqlite3.OperationalError as exc:  # locked, or cannot be opened now: retry
            raise OpsError(Code.STORAGE_UNAVAILABLE, f"cannot read {path}: {exc}") from exc
        except sqlite3.DatabaseError as exc:  # malformed, truncated, not a database
            raise _Unreadable(f"{path} cannot be read: {exc}") from exc
        finally:
            conn.close()
        return
    assert store.db_url is not None
    pg = pg_connect(store.db_url)
    try:
        pg.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")

        def post(sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
            rows: list[tuple[Any, ...]] = pg.execute(sql.replace("?", "%s"), params).fetchall()
            return rows

        yield post
    except Exception as exc:  # psycopg.Error: imported with the postgres extra only
        if type(exc).__module__.startswith("psycopg"):
            raise OpsError(Code.STORAGE_UNAVAILABLE, f"cannot read the database: {exc}") from exc
        raise
    finally:
        pg.close()


class _Unreadable(Exception):
    """The database's bytes are not a database (truncated, overwritten): a problem of the
    data, never a reason to try again."""


def verify(store: Store, hash_blobs: bool = True) -> Report:
    """Every check on `store`; the report lists what is wrong."""
    report = Report()
    try:
        with _reader(store) as q:
            if store.engine == "sqlite":
                _integrity(q, report)
            if not _schema(q, store.engine, report):
                return report  # the tables below may not be what this agentpost reads
            _seqs(q, report)
            _events(q, report)
            _media(q, store, report, hash_blobs)
            _keys(q, report)
            _inbox(q, report)
            _tokens(q, report)
    except _Unreadable as exc:
        report.problem("integrity", str(exc))
    return report


def _integrity(q: Query, report: Report) -> None:
    for (line,) in q("PRAGMA integrity_check", ()):
        if line != "ok":
            report.problem("integrity", str(line))
    for row in q("PRAGMA foreign_key_check", ()):
        report.problem("integrity", f"table {row[0]} row {row[1]} names a missing {row[2]}")


def _schema(q: Query, engine: str, report: Report) -> bool:
    known = migrate.known_version(engine)
    try:
        have = sorted(int(r[0]) for r in q("SELECT version FROM schema_version", ()))
    except Exception as exc:  # no schema_version: not a hub database
        report.problem("schema", f"no schema_version table: not an agentpost database ({exc})")
        return False
    report.counts["schema_version"] = have[-1] if have else 0
    if not have:
        report.problem("schema", "no schema version applied: not an agentpost database")
        return False
    if have[-1] > known:
        report.problem(
            "schema",
            f"schema version {have[-1]} is newer than this agentpost knows ({known}): check it "
            "with the agentpost that wrote it",
        )
        return False
    shipped = [v for v, _ in migrate.available("postgres" if engine != "sqlite" else "sqlite")]
    skipped = [v for v in shipped if v <= have[-1] and v not in have]
    if skipped:
        report.problem("schema", f"versions {skipped} were never applied below {have[-1]}")
    if have[-1] < known:
        report.notes.append(
            f"schema version {have[-1]}; this agentpost is at {known}: a hub (or agentpost db "
            "migrate) brings it up to date"
        )
    return True


def _seqs(q: Query, report: Report) -> None:
    # Schema 14: the events at or below a room's floor_seq were removed by retention.
    floor = "r.floor_seq" if report.counts["schema_version"] >= 14 else "0"
    rows = q(
        f"SELECT r.id, r.last_seq, COUNT(e.seq), MIN(e.seq), MAX(e.seq), {floor} FROM rooms r "
        f"LEFT JOIN events e ON e.room_id = r.id GROUP BY r.id, r.last_seq, {floor}",
        (),
    )
    report.counts["rooms"] = len(rows)
    for room, last, count, low, high, gone in rows:
        count, last, gone = int(count), int(last), int(gone)
        if count == 0:
            if last != gone:
                report.problem("seqs", f"room {room}: last_seq {last} but no events")
            continue
        if int(low) != gone + 1 or int(high) - gone != count:
            report.problem("seqs", f"room {room}: {count} events numbered {low}..{high}: a gap")
        if int(high) != last:
            report.problem("seqs", f"room {room}: last_seq {last}, last event {high}")
    orphans = q(
        "SELECT COUNT(*) FROM events e WHERE NOT EXISTS "
        "(SELECT 1 FROM rooms r WHERE r.id = e.room_id)",
        (),
    )[0][0]
    if orphans:
        report.problem("seqs", f"{orphans} events of rooms that do not exist")


def _events(q: Query, report: Report) -> None:
    after = ("", 0)
    total = 0
    while True:
        rows = q(
            "SELECT room_id, seq, id, body FROM events WHERE (room_id > ?) OR "
            "(room_id = ? AND seq > ?) ORDER BY room_id, seq LIMIT ?",
            (after[0], after[0], after[1], _BATCH),
        )
        for room, seq, event_id, body in rows:
            total += 1
            try:
                ev = json.loads(bytes(body))
                good = (ev.get("id"), ev.get("room"), ev.get("seq")) == (event_id, room, seq)
            except (ValueError, AttributeError):
                good = False
            if not good:
                report.problem(
                    "events",
                    f"event {event_id} (room {room} seq {seq}): body is not that event's JSON",
                )
        if len(rows) < _BATCH:
            break
        after = (rows[-1][0], int(rows[-1][1]))
    report.counts["events"] = total


def _media(q: Query, store: Store, report: Report, hash_blobs: bool) -> None:
    # Bytes of a redacted or expired file may be gone for good (hub/retention.py): only the
    # files a download may still ask for must have theirs. `expired_at` came with schema 14.
    gone = "redacted = 1" + (
        " OR expired_at IS NOT NULL" if report.counts["schema_version"] >= 14 else ""
    )
    rows = q(
        f"SELECT id, sha256, size, CASE WHEN {gone} THEN 1 ELSE 0 END FROM media ORDER BY id", ()
    )
    report.counts["media"] = len(rows)
    named = set()
    checked: dict[str, tuple[str, int] | None] = {}
    for media_id, sha, size, ended in rows:
        named.add(sha)
        if ended:
            continue
        path = store.blob_dir / sha[:2] / sha
        if sha not in checked:
            if not path.is_file():
                checked[sha] = None
            elif hash_blobs:
                checked[sha] = hash_file(path)
            else:
                checked[sha] = (sha, path.stat().st_size)
        found = checked[sha]
        if found is None:
            report.problem("media", f"media {media_id}: its bytes are missing ({path})")
        elif found[1] != int(size):
            report.problem(
                "media", f"media {media_id}: {found[1]} bytes on disk, {size} in its row"
            )
        elif found[0] != sha:
            report.problem(
                "media", f"media {media_id}: the bytes on disk do not match sha256 {sha}"
            )
    report.counts["blobs"] = len(named)
    if store.blob_dir.is_dir():
        spare = [p for p in store.blob_dir.glob("??/*") if p.name not in named]
        if spare:
            size = sum(p.stat().st_size for p in spare)
            report.notes.append(f"{len(spare)} blobs ({size} bytes) no media row names")


def _keys(q: Query, report: Report) -> None:
    rows = q(
        "SELECT member_id, key, fingerprint, state, status, body, event_id FROM idempotency_keys",
        (),
    )
    report.counts["keys"] = len(rows)
    for member, key, fingerprint, state, status, body, event_id in rows:
        where = f"key {key!r} of {member}"
        if state not in _STATES:
            report.problem("keys", f"{where}: unknown state {state!r}")
            continue
        low, high = _STATES[state]
        if not low <= int(status) <= high:
            report.problem("keys", f"{where}: status {status} with state {state}")
        if not fingerprint:
            report.problem("keys", f"{where}: no fingerprint")
        if state != "claimed":
            try:
                json.loads(bytes(body))
            except ValueError:
                report.problem("keys", f"{where}: the stored response is not JSON")
        if state == "created" and not event_id and int(status) == 201:
            report.problem("keys", f"{where}: created, but names no event")


def _inbox(q: Query, report: Report) -> None:
    missing = q(
        "SELECT i.member_id, i.cursor, i.room_id, i.seq FROM inbox i WHERE NOT EXISTS "
        "(SELECT 1 FROM events e WHERE e.room_id = i.room_id AND e.seq = i.seq)",
        (),
    )
    for member, cursor, room, seq in missing:
        report.problem("inbox", f"inbox item {cursor} of {member}: no event {room}#{seq}")
    beyond = q(
        "SELECT m.id, m.inbox_last, MAX(i.cursor) FROM members m JOIN inbox i "
        "ON i.member_id = m.id GROUP BY m.id, m.inbox_last HAVING MAX(i.cursor) > m.inbox_last",
        (),
    )
    for member, last, high in beyond:
        report.problem("inbox", f"member {member}: inbox item {high} past its last cursor {last}")
    report.counts["inbox"] = int(q("SELECT COUNT(*) FROM inbox", ())[0][0])


def _tokens(q: Query, report: Report) -> None:
    orphans = q(
        "SELECT COUNT(*) FROM tokens t WHERE NOT EXISTS "
        "(SELECT 1 FROM members m WHERE m.id = t.member_id)",
        (),
    )[0][0]
    if orphans:
        report.problem("tokens", f"{orphans} tokens of members that do not exist")
