"""The PostgreSQL engine: many hub processes, one truth (docs/deploy.md).

Writes use the same group commit as SQLite (store/batch.py) on one connection per process;
row locks do the cross-process work: the key claim waits on its unique index, a room's
`seq` and a member's inbox cursor are taken under that row's lock. Committed wake-ups go
out with `pg_notify` inside the transaction (delivered only on commit) and a listener
thread passes every process's notifications to its streams. Reads use a small pool in
worker threads. psycopg 3's sync API serves both, so the domain SQL runs unchanged on
either engine (one code path, no async twin).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo
from psycopg import errors as pg_errors
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

from agentpost.core.errors import StorageUnavailable
from agentpost.store import migrate
from agentpost.store.batch import AsData, GroupCommitWriter, JobState
from agentpost.store.engine import CrashPoints, Params, Row

T = TypeVar("T")
log = logging.getLogger("agentpost.store.postgres")

CHANNEL = "agentpost"
MIGRATION_LOCK = 0x61676E74  # pg_advisory_lock key: one migrating process at a time
_sql_cache: dict[str, str] = {}


def _sql(sql: str) -> str:
    """Domain SQL uses `?`; psycopg wants `%s` (no literal `%` or `?` appear in our SQL)."""
    out = _sql_cache.get(sql)
    if out is None:
        out = _sql_cache[sql] = sql.replace("?", "%s")
    return out


class PgDb:
    dialect = "postgres"

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def one(self, sql: str, params: Params = ()) -> Row | None:
        row: Row | None = self.conn.execute(_sql(sql), tuple(params)).fetchone()
        return row

    def all(self, sql: str, params: Params = ()) -> list[Row]:
        return self.conn.execute(_sql(sql), tuple(params)).fetchall()

    def run(self, sql: str, params: Params = ()) -> int:
        return self.conn.execute(_sql(sql), tuple(params)).rowcount

    @contextlib.contextmanager
    def pipeline(self) -> Iterator[None]:
        with self.conn.pipeline():
            yield


class PgTx(PgDb, JobState):
    """One job's view of the batch transaction."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        PgDb.__init__(self, conn)
        JobState.__init__(self)


def _storage_error(exc: BaseException) -> bool:
    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)


def unreachable(dsn: str, exc: psycopg.OperationalError) -> str:
    """psycopg's message in one line that names the server and where its URL comes from:
    libpq says it on two (the second a question, tab-indented) and repeats the host."""
    try:
        info = conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        info = {}
    host = str(info.get("host") or "localhost")
    where = f"{host}:{info.get('port') or 5432}"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    # "connection failed: connection to server at "h", port p failed: REASON": the reason
    reason = re.sub(r"\[Errno -?\d+\] ", "", first.rpartition("failed: ")[2]).strip() or first
    return (
        f"cannot reach PostgreSQL at {where} ({reason}): check that it runs there and "
        "accepts connections, and the URL in AGENTPOST_DB or --db"
    )


class _Backend:
    """Transactions on this process's writer connection, reconnecting when it was lost."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn: psycopg.Connection[Any] | None = None

    def _live(self) -> psycopg.Connection[Any]:
        if self.conn is None or self.conn.closed or self.conn.broken:
            if self.conn is not None:
                self.conn.close()
            self.conn = psycopg.connect(self.dsn, autocommit=True)
        return self.conn

    def begin(self) -> None:
        try:
            self._live().execute("BEGIN")
        except psycopg.OperationalError as exc:
            # The server restarted or dropped us since the last batch: one fresh connection.
            log.warning("writer connection lost (%s); reconnecting", exc)
            if self.conn is not None:
                self.conn.close()
            self._live().execute("BEGIN")

    def new_tx(self) -> PgTx:
        assert self.conn is not None
        return PgTx(self.conn)

    def _exec(self, sql: str) -> None:
        assert self.conn is not None
        self.conn.execute(sql)

    def savepoint(self) -> None:
        self._exec("SAVEPOINT job")

    def release(self) -> None:
        # Nothing to send: a round trip saved per job (issue 14). The job's savepoint simply
        # stays until COMMIT; the next job's `SAVEPOINT job` shadows it, and ROLLBACK TO
        # always goes to the newest one of that name, so a later job still fails alone.
        pass

    def rollback_to(self) -> None:
        self._exec("ROLLBACK TO SAVEPOINT job")
        self._exec("RELEASE SAVEPOINT job")

    def commit(self) -> None:
        self._exec("COMMIT")

    def rollback(self) -> None:
        self._exec("ROLLBACK")

    def publish(self, keys: list[str]) -> None:
        assert self.conn is not None
        self.conn.execute("SELECT pg_notify(%s, k) FROM unnest(%s::text[]) AS k", (CHANNEL, keys))

    def in_transaction(self) -> bool:
        if self.conn is None or self.conn.closed or self.conn.broken:
            return False
        status = self.conn.info.transaction_status
        return status in (TransactionStatus.INTRANS, TransactionStatus.INERROR)

    def storage_error(self, exc: BaseException) -> bool:
        return _storage_error(exc)

    def retry_job(self, exc: BaseException) -> bool:
        return isinstance(exc, pg_errors.DeadlockDetected | pg_errors.SerializationFailure)


class _ReadLane:
    """Reads on a pool of their own connections and threads (docs/deploy.md)."""

    def __init__(self, dsn: str, connections: int, name: str, min_size: int) -> None:
        self.pool = ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=connections,
            kwargs={"autocommit": True},
            open=True,
            timeout=10.0,
        )
        self.threads = ThreadPoolExecutor(connections, thread_name_prefix=name)

    async def read(self, fn: Callable[[PgDb], T]) -> T:
        def run() -> T:
            with self.pool.connection() as conn:
                return fn(PgDb(conn))

        loop = asyncio.get_running_loop()
        for attempt in (1, 2):
            try:
                return await loop.run_in_executor(self.threads, run)
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:  # PoolTimeout too
                # A pooled connection may have died with a server restart; the pool drops
                # it, and a read is safe to run once more on a fresh one.
                if attempt == 2:
                    log.error("read failed: %s", exc)
                    raise StorageUnavailable() from exc
                log.warning("read failed (%s); trying a fresh connection", exc)
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.threads.shutdown(wait=False)
        self.pool.close()


class PostgresEngine:
    dialect = "postgres"
    # Any number of hub processes write to it.
    shared = True

    def __init__(
        self,
        dsn: str,
        crash_points: CrashPoints | None = None,
        read_connections: int = 8,
        writers: int = 4,
        stream_connections: int = 2,
    ) -> None:
        self.dsn = dsn
        try:
            self._migrate()
            self._requests = _ReadLane(dsn, read_connections, "pg-read", min_size=1)
            # Stream pages read on connections of their own, opened when a stream first
            # reads: however many readers a room has, requests never queue behind them.
            self._streams = _ReadLane(dsn, stream_connections, "pg-stream", min_size=0)
        except psycopg.OperationalError as exc:
            raise StorageUnavailable(unreachable(dsn, exc)) from exc
        crash = crash_points or CrashPoints()
        # Several writers, one connection each: a room's writes always go to the same one
        # (by its id), so rooms spread over parallel group commits; their row locks are taken
        # in one global order (store/batch.py), so the writers cannot deadlock.
        self._writers = [
            GroupCommitWriter(_Backend(dsn), f"pg-writer-{i}", crash) for i in range(writers)
        ]
        self._callback: Callable[[str], None] = lambda key: None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop = threading.Event()
        self._listener: threading.Thread | None = None

    def _migrate(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
            try:
                for version, sql in migrate.pending(PgDb(conn)):
                    with conn.transaction():
                        for stmt in migrate.statements(sql):
                            conn.execute(stmt)
                        conn.execute("INSERT INTO schema_version VALUES (%s)", (version,))
                    log.info("applied migration %d", version)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))

    # -- wake-ups across processes -----------------------------------------------------

    def written_as_data(self) -> int:
        return sum(writer.as_data for writer in self._writers)

    def on_notify(self, callback: Callable[[str], None]) -> None:
        self._callback = callback
        self._loop = asyncio.get_running_loop()
        for writer in self._writers:
            writer.notify = callback
        self._listener = threading.Thread(target=self._listen, name="pg-listen", daemon=True)
        self._listener.start()

    def _deliver(self, key: str) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(self._callback, key)
            except RuntimeError:
                pass  # the loop closed between the check and the call: nobody waits

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.dsn, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    # Anything committed while we were not listening: wake every waiter;
                    # they re-read the tables, so no event is missed (docs/deploy.md).
                    self._deliver("*")
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            self._deliver(note.payload)
            except psycopg.Error as exc:
                if self._stop.is_set():
                    return
                log.warning("LISTEN connection lost (%s); reconnecting", exc)
                self._stop.wait(0.5)

    # -- the Engine interface ----------------------------------------------------------

    async def read(self, fn: Callable[[PgDb], T]) -> T:
        return await self._requests.read(fn)

    async def read_stream(self, fn: Callable[[PgDb], T]) -> T:
        return await self._streams.read(fn)

    async def write(
        self, fn: Callable[[PgTx], T], order: str = "", as_data: AsData | None = None
    ) -> T:
        writer = self._writers[zlib.crc32(order.encode()) % len(self._writers)]
        result: T = await writer.submit(fn, order, as_data)
        return result

    async def close(self) -> None:
        self._stop.set()
        for writer in self._writers:
            await asyncio.to_thread(writer.stop)
        if self._listener is not None:
            await asyncio.to_thread(self._listener.join, 5)
        self._requests.close()
        self._streams.close()
        for writer in self._writers:
            backend = writer.backend
            if isinstance(backend, _Backend) and backend.conn is not None:
                backend.conn.close()
