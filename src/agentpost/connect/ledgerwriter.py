"""Group commit for the delivery ledger (docs/architecture.md#ledger: WAL, synchronous FULL).

One thread owns the ledger's write connection. It takes every write job waiting, runs them
in ONE transaction (when one fails, each runs again in its own, so a failing job is undone
alone), commits once — the fsync — and only then answers each job. So 16 deliveries in
flight share one fsync instead of paying one each, and no commit ever blocks the Worker's
event loop.
Write-ahead still holds per job: an answer means that job's rows are on disk.

A write nobody waits for (`submit`: a posted part's record) lingers up to `LINGER` for one
that somebody does, and rides its commit: with deliveries in flight the
next first-seen entry comes within milliseconds, so their records cost no fsync of their
own. At most `LINGER` of them is lost to a kill -9, which nothing depends on (docs/deliver.md
"Ledger"); a stop commits them first.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from agentpost.core.queues import take_batch, take_waiting

log = logging.getLogger("agentpost.connect.ledger")

T = TypeVar("T")
MAX_BATCH = 256
LINGER = 0.05  # seconds a write nobody waits for may wait for one somebody does

WriteJob = Callable[[sqlite3.Connection], Any]


class _Job:
    __slots__ = ("fn", "future", "loop", "ok", "value")

    def __init__(
        self,
        fn: WriteJob,
        future: asyncio.Future[Any] | concurrent.futures.Future[Any] | None,
        loop: asyncio.AbstractEventLoop | None,
    ) -> None:
        self.fn = fn
        self.future = future
        self.loop = loop
        self.ok = False
        self.value: Any = None


class LedgerWriter:
    """`await writer.run(fn)` runs `fn(conn)` in the next batch and returns its value once
    the batch's commit returned; `writer.run_sync(fn)` the same for callers off the loop
    (or rare ones on it). A job that raises gets its exception back; a failed commit gives
    every job of the batch `sqlite3.OperationalError`."""

    def __init__(self, conn: sqlite3.Connection, name: str = "ledger-writer") -> None:
        self._conn = conn
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lazy: collections.deque[_Job] = collections.deque()  # nobody waits for these
        self._lazy_lock = threading.Lock()  # submit's "first of a run" test, from any thread
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        self._queue.put(_Job(fn, fut, loop))
        return await fut

    def run_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if threading.current_thread() is self._thread:
            raise RuntimeError("run_sync from the ledger writer itself would deadlock")
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()
        self._queue.put(_Job(fn, fut, None))
        return fut.result()

    def submit(self, fn: WriteJob) -> None:
        """Queue `fn` without waiting for its commit, which may linger up to `LINGER` for a
        write somebody waits for. It commits no later than any write queued after it (so a
        later awaited `run` returning means this one is on disk too), and possibly in the
        same transaction ahead of awaited writes queued before it and not yet committed:
        submit a write only after awaiting the one it depends on. A failure is logged (the
        caller chose not to wait for the answer)."""
        with self._lazy_lock:
            self._lazy.append(_Job(fn, None, None))
            first = len(self._lazy) == 1
        if first:  # the writer may be idle: this starts its linger
            self._queue.put(_WAKE)

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def _loop(self) -> None:
        while True:
            if self._lazy:  # queued while the last batch ran: take what waits, or linger
                jobs, stop = take_waiting(self._queue, [], MAX_BATCH)
            else:
                jobs, stop = take_batch(self._queue, MAX_BATCH)
            jobs = [j for j in jobs if j is not _WAKE]
            if not jobs and not stop:
                jobs, stop = self._linger()
            batch = self._take_lazy() + jobs
            if batch:
                try:
                    self._run(batch)
                except BaseException as exc:  # the writer must never die silently
                    log.exception("ledger write batch of %d failed unexpectedly", len(batch))
                    for j in batch:
                        j.ok, j.value = False, sqlite3.OperationalError(f"ledger writer: {exc!r}")
                self._answer(batch)
            if stop:
                return

    def _linger(self) -> tuple[list[_Job], bool]:
        """Wait up to `LINGER` for a write somebody waits for, then take every other one
        already waiting (their commit takes the queued ones along); True when a stop was
        seen."""
        deadline = time.monotonic() + LINGER
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return [], False
            try:
                job = self._queue.get(timeout=left)
            except queue.Empty:
                return [], False
            if job is None:
                return [], True
            if job is not _WAKE:
                jobs, stop = take_waiting(self._queue, [job], MAX_BATCH)
                return [j for j in jobs if j is not _WAKE], stop

    def _take_lazy(self) -> list[_Job]:
        taken: list[_Job] = []
        while self._lazy:
            taken.append(self._lazy.popleft())
        return taken

    def _run(self, batch: list[_Job]) -> None:
        """One transaction for the batch. A job that fails on its own (a constraint, a
        trigger) rolls it back, and then each job runs in a transaction of its own, so its
        error is its answer alone (a savepoint per job would cost two more statements, and
        GIL hand-offs, every job). When SQLite rolled the batch back itself (disk full, an
        I/O error), every job of it gets that error at once."""
        if not self._run_together(batch, alone=len(batch) == 1):
            for j in batch:
                self._run_together([j], alone=True)

    def _run_together(self, batch: list[_Job], alone: bool) -> bool:
        """Run and commit `batch`; False when a job failed and, not `alone`, nothing was
        answered (the transaction is rolled back)."""
        db = self._conn
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            for j in batch:
                j.ok, j.value = False, exc
            return True
        for j in batch:
            try:
                j.ok, j.value = True, j.fn(db)
            except Exception as exc:
                if not db.in_transaction:  # SQLite rolled it back itself (disk full, I/O):
                    for k in batch:  # not this job's fault, and each alone would fail too
                        k.ok, k.value = False, exc
                    return True
                try:
                    db.execute("ROLLBACK")
                except sqlite3.Error:
                    log.exception("rolling back a failed ledger batch failed")
                if not alone:
                    return False  # this job's own error (a constraint, a trigger)
                j.ok, j.value = False, exc
                return True
        try:
            db.execute("COMMIT")  # synchronous=FULL: the WAL is fsync'd before this returns
        except sqlite3.Error as exc:
            log.error("ledger commit failed, batch of %d rolled back: %s", len(batch), exc)
            if db.in_transaction:
                try:
                    db.execute("ROLLBACK")
                except sqlite3.Error:
                    log.exception("rollback after a failed ledger commit also failed")
            for j in batch:
                j.ok, j.value = False, exc
        return True

    def _answer(self, batch: list[_Job]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[_Job]] = {}
        for j in batch:
            if j.future is None:  # nobody waits: a failure is logged, the caller chose so
                if not j.ok:
                    log.error("a ledger write nobody waited for failed: %s", j.value)
            elif j.loop is None:
                assert isinstance(j.future, concurrent.futures.Future)
                if j.ok:
                    j.future.set_result(j.value)
                else:
                    j.future.set_exception(j.value)
            else:
                by_loop.setdefault(j.loop, []).append(j)
        for loop, jobs in by_loop.items():  # one wake-up of each loop per batch
            try:
                loop.call_soon_threadsafe(_settle, jobs)
            except RuntimeError:  # that loop is closed: nobody waits for these answers
                log.info("ledger answers for a closed event loop dropped (%d)", len(jobs))


_WAKE = _Job(lambda db: None, None, None)  # on the queue: writes nobody waits for are queued


def _settle(jobs: list[_Job]) -> None:
    for j in jobs:
        fut = j.future
        assert isinstance(fut, asyncio.Future)
        if fut.done():  # its waiter was cancelled; the write itself is committed
            continue
        if j.ok:
            fut.set_result(j.value)
        else:
            fut.set_exception(j.value)
