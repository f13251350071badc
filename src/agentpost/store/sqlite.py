"""The embedded SQLite engine: WAL, synchronous=FULL, one writer thread with group commit.

Writes from concurrent requests are batched into one transaction (each job inside its own
SAVEPOINT, so one refused job does not undo the others) and acknowledged only after the
COMMIT returns: durability of one fsync per batch instead of one per request (DESIGN.md §8).
Reads run directly on a separate connection; WAL lets them proceed while the writer commits.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from agentpost.core.errors import AgentpostError, StorageUnavailable
from agentpost.store import migrate
from agentpost.store.engine import CrashPoints, Params, Row

T = TypeVar("T")
log = logging.getLogger("agentpost.store.sqlite")

MAX_BATCH = 512


class SQLiteDb:
    """A sqlite3 connection behind the `Db` protocol."""

    dialect = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def one(self, sql: str, params: Params = ()) -> Row | None:
        row: Row | None = self.conn.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        return self.conn.execute(sql, params).fetchall()

    def run(self, sql: str, params: Params = ()) -> int:
        return self.conn.execute(sql, params).rowcount


class SQLiteTx(SQLiteDb):
    """One job's view of the batch transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)
        self.callbacks: list[Callable[[], None]] = []

    def after_commit(self, callback: Callable[[], None]) -> None:
        self.callbacks.append(callback)


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=10000")
    return conn


_Job = tuple[Callable[[SQLiteTx], Any], "asyncio.Future[Any]", asyncio.AbstractEventLoop]


class SQLiteEngine:
    """The default store engine: `<data>/hub.sqlite3`."""

    dialect = "sqlite"

    def __init__(self, path: Path, crash_points: CrashPoints | None = None) -> None:
        self.path = path
        self.crash = crash_points or CrashPoints()
        self._writer_conn = _connect(path)
        self._migrate()
        self._reader = SQLiteDb(_connect(path))
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._writer_loop, name="sqlite-writer", daemon=True)
        self._thread.start()
        self.batches = 0
        self.jobs = 0

    def _migrate(self) -> None:
        db = SQLiteDb(self._writer_conn)
        todo = migrate.pending(db)
        for version, sql in todo:
            self._writer_conn.execute("BEGIN IMMEDIATE")
            try:
                for stmt in migrate.statements(sql):
                    self._writer_conn.execute(stmt)
                self._writer_conn.execute("INSERT INTO schema_version VALUES (?)", (version,))
                self._writer_conn.execute("COMMIT")
            except BaseException:
                self._writer_conn.execute("ROLLBACK")
                raise
            log.info("applied migration %d", version)

    async def read(self, fn: Callable[[SQLiteDb], T]) -> T:
        try:
            return fn(self._reader)
        except sqlite3.Error as exc:
            log.error("read failed: %s", exc)
            raise StorageUnavailable() from exc

    async def write(self, fn: Callable[[SQLiteTx], T]) -> T:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._queue.put((fn, fut, loop))
        return await fut

    async def close(self) -> None:
        self._queue.put(None)
        await asyncio.to_thread(self._thread.join)
        self._reader.conn.close()
        self._writer_conn.close()

    # -- the writer thread -------------------------------------------------------------

    def _writer_loop(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            batch = [job]
            while len(batch) < MAX_BATCH:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._run_batch(batch)
                    return
                batch.append(nxt)
            self._run_batch(batch)

    def _run_batch(self, batch: list[_Job]) -> None:
        conn = self._writer_conn
        outcomes: list[_Outcome] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            log.error("cannot begin a write transaction: %s", exc)
            self._settle(batch, [(False, StorageUnavailable(), [])] * len(batch))
            return
        for fn, _fut, _loop in batch:
            tx = SQLiteTx(conn)
            try:  # SAVEPOINT and RELEASE inside: an error there must not kill the writer
                conn.execute("SAVEPOINT job")
                result = fn(tx)
                conn.execute("RELEASE job")
            except BaseException as exc:  # each job fails alone; the batch goes on
                self._undo_job(conn)
                if not conn.in_transaction:
                    # SQLite rolled back the whole batch itself (SQLITE_FULL, SQLITE_IOERR):
                    # the jobs before this one are gone too, and none may be acknowledged.
                    log.error("write failed, batch of %d rolled back: %s", len(batch), exc)
                    self._settle(batch, [(False, StorageUnavailable(), [])] * len(batch))
                    return
                if isinstance(exc, sqlite3.Error):
                    log.error("write failed, job rolled back: %s", exc)
                    exc = StorageUnavailable()
                elif not isinstance(exc, AgentpostError):
                    log.exception("write job raised; job rolled back")
                outcomes.append((False, exc, []))
            else:
                outcomes.append((True, result, tx.callbacks))
        self.crash.reach("before_commit")
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            log.error("commit failed, batch of %d rolled back: %s", len(batch), exc)
            # On SQLITE_FULL / SQLITE_IOERR SQLite has already rolled back; only a
            # transaction still open (e.g. SQLITE_BUSY) needs an explicit ROLLBACK.
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    log.exception("rollback after failed commit also failed")
            outcomes = [
                (False, StorageUnavailable(), []) if ok else (ok, r, cbs) for ok, r, cbs in outcomes
            ]
        else:
            self.crash.reach("after_commit")
        self.batches += 1
        self.jobs += len(batch)
        self._settle(batch, outcomes)

    @staticmethod
    def _undo_job(conn: sqlite3.Connection) -> None:
        if not conn.in_transaction:
            return  # SQLite already rolled back the whole batch
        try:
            conn.execute("ROLLBACK TO job")
            conn.execute("RELEASE job")
        except sqlite3.Error:
            log.exception("rollback to savepoint failed")

    @staticmethod
    def _settle(batch: list[_Job], outcomes: list[_Outcome]) -> None:
        # One wake-up per event loop per batch, not one per job.
        per_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], _Outcome]]] = {}
        for (_fn, fut, loop), outcome in zip(batch, outcomes, strict=True):
            per_loop.setdefault(loop, []).append((fut, outcome))
        for loop, items in per_loop.items():
            loop.call_soon_threadsafe(_resolve_all, items)


_Outcome = tuple[bool, Any, list[Callable[[], None]]]


def _resolve_all(items: list[tuple[asyncio.Future[Any], _Outcome]]) -> None:
    for fut, (ok, value, callbacks) in items:
        for cb in callbacks:
            try:
                cb()
            except Exception:
                log.exception("after-commit callback failed (the write itself is committed)")
        if fut.cancelled():
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)
