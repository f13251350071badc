"""The embedded SQLite engine: WAL, synchronous=FULL, one writer thread with group commit.

Writes go through `GroupCommitWriter` (store/batch.py): batched into one transaction and
acknowledged only after the COMMIT returned. Reads run directly on a separate connection;
WAL lets them proceed while the writer commits (docs/deploy.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TypeVar

from agentpost.core.errors import StorageUnavailable
from agentpost.store import migrate
from agentpost.store.batch import AsData, GroupCommitWriter, JobState
from agentpost.store.engine import CrashPoints, Params, Row
from agentpost.store.files import private_file

T = TypeVar("T")
log = logging.getLogger("agentpost.store.sqlite")


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

    def pipeline(self) -> AbstractContextManager[None]:
        return contextlib.nullcontext()  # in-process: no round trips to save


class SQLiteTx(SQLiteDb, JobState):
    """One job's view of the batch transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        SQLiteDb.__init__(self, conn)
        JobState.__init__(self)


WAL_SIZE_LIMIT = 16 * 1024 * 1024


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=10000")
    # The WAL file keeps the size of its longest stretch between checkpoints (a reader that
    # held its snapshot through a burst); past this, a checkpoint that empties it cuts it back.
    conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
    return conn


class _Backend:
    """Transactions on the writer connection, for `GroupCommitWriter`."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def new_tx(self) -> SQLiteTx:
        return SQLiteTx(self.conn)

    def savepoint(self) -> None:
        self.conn.execute("SAVEPOINT job")

    def release(self) -> None:
        self.conn.execute("RELEASE job")

    def rollback_to(self) -> None:
        self.conn.execute("ROLLBACK TO job")
        self.conn.execute("RELEASE job")

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")

    def publish(self, keys: list[str]) -> None:
        pass  # one process owns the file: the after-commit wake-ups are all there is

    def in_transaction(self) -> bool:
        # On SQLITE_FULL / SQLITE_IOERR SQLite rolls back the whole transaction itself.
        return self.conn.in_transaction

    def storage_error(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.Error)

    def retry_job(self, exc: BaseException) -> bool:
        return False  # one writer: no lock races inside SQLite


class SQLiteEngine:
    """The default store engine: `<data>/hub.sqlite3`."""

    dialect = "sqlite"
    # One process owns the file: every write goes through this engine.
    shared = False

    def __init__(self, path: Path, crash_points: CrashPoints | None = None) -> None:
        self.path = path
        private_file(path)
        self._writer_conn = _connect(path)
        self._migrate()
        self._reader = SQLiteDb(_connect(path))
        self._writer = GroupCommitWriter(
            _Backend(self._writer_conn), "sqlite-writer", crash_points or CrashPoints()
        )

    def _migrate(self) -> None:
        conn = self._writer_conn
        for version, sql in migrate.pending(SQLiteDb(conn)):
            conn.execute("BEGIN IMMEDIATE")
            try:
                for stmt in migrate.statements(sql):
                    conn.execute(stmt)
                conn.execute("INSERT INTO schema_version VALUES (?)", (version,))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            log.info("applied migration %d", version)

    def written_as_data(self) -> int:
        return self._writer.as_data

    def on_notify(self, callback: Callable[[str], None]) -> None:
        self._writer.notify = callback

    async def read(self, fn: Callable[[SQLiteDb], T]) -> T:
        try:
            return fn(self._reader)
        except sqlite3.Error as exc:
            log.error("read failed: %s", exc)
            raise StorageUnavailable() from exc

    async def read_stream(self, fn: Callable[[SQLiteDb], T]) -> T:
        """One file, one reader connection: a stream page is an ordinary read (it is
        bounded in bytes, so it holds the loop no longer than any other page)."""
        return await self.read(fn)

    async def write(
        self, fn: Callable[[SQLiteTx], T], order: str = "", as_data: AsData | None = None
    ) -> T:
        result: T = await self._writer.submit(fn, order, as_data)
        return result

    async def close(self) -> None:
        await asyncio.to_thread(self._writer.stop)
        self._reader.conn.close()
        self._writer_conn.close()
