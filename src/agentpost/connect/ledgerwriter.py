"""Writes and group fsync for the delivery ledger (DESIGN.md §6 "Ledger": WAL, and every
answer that depends on a write waits for that write's fsync).

A write runs at once, on the caller's thread, in a transaction of its own whose COMMIT puts
its WAL frames in the page cache without syncing (`synchronous=NORMAL`): tens of µs. Being
on disk is asked for separately: `await durable()` returns once an `fdatasync` of the WAL
that *started after* every commit made so far has returned. The first caller schedules one
sync on the event loop (`call_soon`), and every caller that asks before it runs shares it:
16 deliveries in flight pay one fsync, with no thread hand-off on the way (measured: a sync
thread waking for each group, and the GIL it must take back, cost more than the fsync
itself; bench/README.md "Issue 11, fourth session"). The loop is held for that one
fdatasync (0.1–0.7 ms on this disk under load).

Write-ahead still holds per write: `durable()` returning means that write is on disk. A write
nobody waits for (a posted part's record) is synced by the next `durable()`, or `LINGER`
later. A failed fsync is fatal for this process's ledger: every later write, read (fail
closed: what is visible may not be on disk) and wait raises `LedgerBroken`, until a restart
recovers what reached the disk. Checkpoints run in a thread on a connection of their own
(`wal_autocheckpoint` is off on the write connection, so no commit copies pages).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

log = logging.getLogger("agentpost.connect.ledger")

T = TypeVar("T")
LINGER = 0.05  # seconds a write nobody waits for may stay unsynced
CHECKPOINT_EVERY = 1000  # commits between two checkpoints (SQLite's default is 1000 pages)


class LedgerBroken(sqlite3.OperationalError):
    """A sync of the ledger failed: nothing written since can be said to be on disk."""


class LedgerWriter:
    """`writer.write(fn)` runs `fn(conn)` in a transaction of its own and returns its value
    (committed, not yet synced); `await writer.durable()` (or `durable_sync()` off the loop)
    returns once every write made before the call is on disk."""

    def __init__(self, path: Path, busy_ms: int) -> None:
        self.path = path
        self._wal = Path(f"{path}-wal")
        self._busy_ms = busy_ms
        self._conn = _connect(path, busy_ms)
        self._conn.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints run in a thread
        self._lock = threading.Lock()  # one transaction at a time on the write connection
        self._mu = threading.Lock()  # the counters, the WAL descriptor, `_error`
        self._written = 0  # commits made
        self._synced = 0  # commits known on disk
        self._since_checkpoint = 0
        self._checkpointing = False
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._scheduled: asyncio.Handle | None = None  # the group's sync, on the loop
        self._linger: asyncio.TimerHandle | None = None
        self._error: LedgerBroken | None = None
        self._fd: int | None = None

    # -- writing -----------------------------------------------------------------------

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run `fn` in a transaction of its own, committed (not synced) when this returns.
        Its error is raised and nothing of it stays written."""
        self.check()
        db = self._conn
        with self._lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                value = fn(db)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    try:
                        db.execute("ROLLBACK")
                    except sqlite3.Error:
                        log.exception("rolling back a failed ledger write failed")
                raise
            with self._mu:
                self._written += 1
        self._linger_on()
        return value

    def check(self) -> None:
        """Raise `LedgerBroken` when a sync has failed (reads fail closed on it too)."""
        if self._error is not None:
            raise self._error

    # -- being on disk -----------------------------------------------------------------

    async def durable(self) -> None:
        """Return once every write committed before this call is on disk."""
        self.check()
        if self._synced >= self._written:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.append((self._written, fut))
        if self._scheduled is None:  # the first of a group: the others share its sync
            self._scheduled = loop.call_soon(self._sync_group)
        await fut

    def durable_sync(self) -> None:
        """`durable()` for a caller off the event loop, or a rare one on it (it syncs there
        and then, alone)."""
        self.check()
        if self._synced < self._written:
            self._sync(self._written)
        self.check()

    def _sync_group(self) -> None:
        self._scheduled = None
        waiters, self._waiters = self._waiters, []
        self._sync(self._written)
        err = self._error
        for target, fut in waiters:
            if fut.done():  # its waiter was cancelled
                continue
            if err is not None:
                fut.set_exception(err)
            elif target <= self._synced:
                fut.set_result(None)
            else:  # unreachable: every waiter's target is at most what was just synced
                fut.set_exception(LedgerBroken(f"{self.path}: a write was not synced"))
        self._maybe_checkpoint()

    def _sync(self, target: int) -> None:
        """fdatasync the WAL: every commit counted in `target` wrote its frames before."""
        try:
            with self._mu:
                fd = self._wal_fd()
            os.fdatasync(fd)
        except OSError as exc:
            err = LedgerBroken(f"{self.path}: syncing the ledger failed: {exc}")
            log.error("%s; the ledger refuses every request until the Worker restarts", err)
            self._error = err
            return
        with self._mu:
            self._since_checkpoint += max(0, target - self._synced)
            self._synced = max(self._synced, target)

    def _wal_fd(self) -> int:
        """The WAL file's descriptor, (re)opened when SQLite made a new file; a new file's
        name is made durable with an fsync of its directory."""
        st = os.stat(self._wal)
        if self._fd is not None:
            mine = os.fstat(self._fd)
            if (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino):
                return self._fd
            os.close(self._fd)
            self._fd = None
        fd = os.open(self._wal, os.O_RDONLY | os.O_CLOEXEC)
        dfd = os.open(self._wal.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        self._fd = fd
        return fd

    def _linger_on(self) -> None:
        """A write nobody may wait for: synced `LINGER` from now unless a group comes first."""
        if self._linger is not None and not self._linger.cancelled():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # off the loop: the caller syncs (`durable_sync`) or stop() does
            return
        self._linger = loop.call_later(LINGER, self._sync_lingering)

    def _sync_lingering(self) -> None:
        self._linger = None
        if self._error is None and self._synced < self._written:
            self._sync(self._written)

    # -- checkpoints -------------------------------------------------------------------

    def _maybe_checkpoint(self) -> None:
        if self._since_checkpoint < CHECKPOINT_EVERY or self._checkpointing or self._error:
            return
        self._checkpointing = True
        self._since_checkpoint = 0
        threading.Thread(target=self._checkpoint, name="ledger-checkpoint", daemon=True).start()

    def _checkpoint(self) -> None:
        """Copy the WAL into the database (PASSIVE: never waits for the writer) so that the
        WAL restarts from its beginning; NORMAL syncs the WAL before and the file after."""
        try:
            db = _connect(self.path, self._busy_ms)
            try:
                db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            finally:
                db.close()
        except sqlite3.Error as exc:  # the WAL keeps growing; the next one tries again
            log.warning("ledger checkpoint failed: %s", exc)
        finally:
            self._checkpointing = False

    def stop(self) -> None:
        """Sync what is written and close."""
        if self._linger is not None:
            self._linger.cancel()
        if self._error is None and self._synced < self._written:
            self._sync(self._written)
        try:
            self._conn.close()
        except sqlite3.Error as exc:
            log.error("closing the ledger: %s", exc)
        with self._mu:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _connect(path: Path, busy_ms: int) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute(f"PRAGMA busy_timeout={busy_ms}")
    mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if str(mode).lower() != "wal":
        db.close()
        raise sqlite3.OperationalError(f"{path}: the ledger needs WAL mode, got {mode!r}")
    # NORMAL: a commit writes its WAL frames without a sync (`LedgerWriter` syncs before
    # anyone is answered); a checkpoint syncs the WAL before it copies, the file after.
    db.execute("PRAGMA synchronous=NORMAL")
    return db
