"""Group commit, shared by both engines (docs/deploy.md).

One writer thread per engine takes every queued write job, runs as many as are waiting in
ONE transaction (each job inside its own savepoint, so a refused job is undone alone), then
commits once and only then answers each job. Durability costs one commit per batch instead
of one per request; no job is acknowledged before its commit returned.

A job may also come as data (`AsData`): consecutive jobs of one batch with the same
`runner` are handed to it together, in one savepoint, so plain posts are written with a
few multi-row statements instead of a few statements each (issue 14). The runner answers
each item or declines it (None); a declined item, and every item of a group whose runner
failed, runs as an ordinary job right after, with the answers it always had.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, Protocol

from agentpost.core.errors import AgentpostError, StorageUnavailable
from agentpost.core.queues import take_batch
from agentpost.store.engine import AsData, CrashPoints, Runner, UndoJob

__all__ = ["AsData", "GroupCommitWriter", "JobState", "Runner"]

log = logging.getLogger("agentpost.store")

MAX_BATCH = 512


_Job = tuple[
    Callable[[Any], Any], "asyncio.Future[Any]", asyncio.AbstractEventLoop, str, AsData | None
]
_Outcome = tuple[bool, Any, list[str]]


class _LockRace(Exception):
    """The batch must be rolled back and run again (a deadlock with another writer)."""


class BatchTx(Protocol):
    wakeups: list[str]
    deferred: list[tuple[tuple[str, ...], Callable[[Any], None]]]


class JobState:
    """What one job leaves for the batch runner: wake-up keys and deferred steps. Mixed into
    each engine's transaction class."""

    def __init__(self) -> None:
        self.wakeups: list[str] = []
        self.deferred: list[tuple[tuple[str, ...], Callable[[Any], None]]] = []

    def notify(self, key: str) -> None:
        # Published once the batch is ready to commit (`Backend.publish`), delivered to this
        # process's waiters right after the commit.
        self.wakeups.append(key)

    def defer(self, key: tuple[str, ...], step: Callable[[Any], None]) -> None:
        self.deferred.append((key, step))


class Backend(Protocol):
    """The engine-specific half: transactions and savepoints on one connection."""

    def begin(self) -> None: ...

    def new_tx(self) -> BatchTx: ...

    def savepoint(self) -> None: ...

    def release(self) -> None: ...

    def rollback_to(self) -> None: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    def publish(self, keys: list[str]) -> None:
        """Send the batch's wake-up keys to other processes, inside the transaction so they
        are delivered only if it commits (one statement per batch)."""
        ...

    def in_transaction(self) -> bool:
        """False when the database itself rolled the whole batch back (SQLITE_FULL,
        SQLITE_IOERR, a lost connection): then no job of the batch may be acknowledged."""
        ...

    def storage_error(self, exc: BaseException) -> bool:
        """True when `exc` means the database cannot write now (→ 503, retry)."""
        ...

    def retry_job(self, exc: BaseException) -> bool:
        """True when the job lost a lock race (deadlock) and should simply run again."""
        ...


class GroupCommitWriter:
    def __init__(self, backend: Backend, name: str, crash: CrashPoints) -> None:
        self.backend = backend
        self.crash = crash
        self.notify: Callable[[str], None] = lambda key: None
        self.as_data = 0  # jobs written as data with others (committed or not), since start
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    async def submit(
        self, fn: Callable[[Any], Any], order: str = "", as_data: AsData | None = None
    ) -> Any:
        """Run `fn(tx)` in the next batch. Jobs of a batch run sorted by `order` (the room they
        lock), so every batch takes room locks in one global order (docs/architecture.md#store).
        With `as_data`, the writer may write it with its neighbours instead (module doc)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._queue.put((fn, fut, loop, order, as_data))
        return await fut

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def _loop(self) -> None:
        while True:
            batch, stop = take_batch(self._queue, MAX_BATCH)
            if not batch:
                return
            batch.sort(key=lambda job: job[3])
            try:
                self._run(batch)
            except BaseException:  # the writer must never die silently
                log.exception("write batch of %d failed unexpectedly", len(batch))
                self._settle(batch, [(False, StorageUnavailable(), [])] * len(batch))
            if stop:
                return

    def _run(self, batch: list[_Job], attempts: int = 5) -> None:
        for attempt in range(attempts):
            try:
                self._run_once(batch)
                return
            except _LockRace as race:
                # A deadlock with another process's batch: our whole transaction goes, so
                # theirs can finish, and every job of ours runs again from the start.
                log.info(
                    "batch of %d lost a lock race (%s); attempt %d", len(batch), race, attempt + 1
                )
                self._rollback_quietly()
        log.error("batch of %d kept losing lock races; answering 503", len(batch))
        self._settle(batch, [(False, StorageUnavailable(), [])] * len(batch))

    def _rollback_quietly(self) -> None:
        if self.backend.in_transaction():
            try:
                self.backend.rollback()
            except Exception:
                log.exception("rollback failed")

    def _run_once(self, batch: list[_Job]) -> None:
        b = self.backend
        try:
            b.begin()
        except Exception as exc:
            log.error("cannot begin a write transaction: %s", exc)
            self._settle(batch, [(False, StorageUnavailable(), [])] * len(batch))
            return
        outcomes: list[_Outcome | None] = [None] * len(batch)
        deferred: list[tuple[tuple[str, ...], Callable[[Any], None]]] = []
        for group in _groups(batch):
            if len(group) > 1:
                deferred += self._run_group(batch, group, outcomes)
            for i in group if b.in_transaction() else ():
                if outcomes[i] is not None:
                    continue
                outcome, steps = self._run_job(batch[i][0])
                if not b.in_transaction():
                    break
                outcomes[i] = outcome
                deferred += steps
            if not b.in_transaction():
                log.error("the database rolled back the whole batch of %d", len(batch))
                self._settle(batch, [(False, StorageUnavailable(), [])] * len(batch))
                return
        done = [o for o in outcomes if o is not None]
        assert len(done) == len(batch), "every job of the batch has its outcome"
        if not self._run_deferred(batch, deferred):
            return
        wakeups = sorted({key for ok, _v, keys in done if ok for key in keys})
        if wakeups:
            try:
                b.publish(wakeups)
            except BaseException as exc:
                log.error(
                    "publishing wake-ups failed, batch of %d rolled back: %s", len(batch), exc
                )
                self._rollback_quietly()
                self._settle(batch, [(False, StorageUnavailable(), [])] * len(batch))
                return
        self.crash.reach("before_commit")
        try:
            b.commit()
        except Exception as exc:
            log.error("commit failed, batch of %d rolled back: %s", len(batch), exc)
            if b.in_transaction():  # SQLITE_FULL/IOERR already rolled back by SQLite
                try:
                    b.rollback()
                except Exception:
                    log.exception("rollback after a failed commit also failed")
            done = [(False, StorageUnavailable(), []) if ok else (ok, v, w) for ok, v, w in done]
        else:
            self.crash.reach("after_commit")
        self._settle(batch, done)

    def _run_group(
        self, batch: list[_Job], group: list[int], outcomes: list[_Outcome | None]
    ) -> list[tuple[tuple[str, ...], Callable[[Any], None]]]:
        """Hand the group's items to their runner in one savepoint; fill in the outcomes it
        answered (the rest run as ordinary jobs). Its deferred steps, if it committed."""
        b = self.backend
        first = batch[group[0]][4]
        assert first is not None
        tx = b.new_tx()
        try:
            b.savepoint()
            answers = first.runner(tx, [_data(batch[i]).item for i in group])
            b.release()
        except BaseException as exc:
            if b.retry_job(exc):
                raise _LockRace(str(exc)) from exc
            if b.in_transaction():
                try:
                    b.rollback_to()
                except Exception:
                    log.exception("rollback to savepoint failed")
                    return []
            log.warning(
                "a group of %d writes failed (%s); writing them one by one", len(group), exc
            )
            return []  # every item runs as its own job (or the batch is lost with the tx)
        for i, answer in zip(group, answers, strict=True):
            if answer is not None:
                outcomes[i] = (True, answer[0], answer[1])
                self.as_data += 1
        return tx.deferred

    def _run_deferred(
        self, batch: list[_Job], deferred: list[tuple[tuple[str, ...], Callable[[Any], None]]]
    ) -> bool:
        """The steps jobs deferred to the end of the batch (taking per-member locks), run
        sorted by their key after every room lock is held: one lock order for all writers.
        A failure here fails the whole batch; nothing of it commits."""
        if not deferred:
            return True
        b = self.backend
        tx = b.new_tx()
        try:
            for _key, step in sorted(deferred, key=lambda d: d[0]):
                step(tx)
        except BaseException as exc:
            if b.retry_job(exc):
                raise _LockRace(str(exc)) from exc
            log.error("deferred write steps failed, batch of %d rolled back: %s", len(batch), exc)
            self._rollback_quietly()
            self._settle(batch, [(False, StorageUnavailable(), [])] * len(batch))
            return False
        return True

    def _run_job(
        self, fn: Callable[[Any], Any]
    ) -> tuple[_Outcome, list[tuple[tuple[str, ...], Callable[[Any], None]]]]:
        b = self.backend
        undone = False
        while True:
            tx = b.new_tx()
            try:  # SAVEPOINT and RELEASE inside: an error there must not kill the writer
                b.savepoint()
                result = fn(tx)
                b.release()
            except BaseException as exc:  # each job fails alone; the batch goes on
                if b.retry_job(exc):
                    raise _LockRace(str(exc)) from exc
                if not b.in_transaction():
                    return (False, StorageUnavailable(), []), []
                try:
                    b.rollback_to()
                except Exception:
                    log.exception("rollback to savepoint failed")
                    return (False, StorageUnavailable(), []), []
                if b.storage_error(exc):
                    log.error("write failed, job rolled back: %s", exc)
                    return (False, StorageUnavailable(), []), []
                if isinstance(exc, UndoJob) and not undone:
                    # Its writes are gone (and its wake-ups and deferred steps with `tx`);
                    # now the step that records the refusal, in a savepoint of its own.
                    undone, fn = True, exc.then
                    continue
                if not isinstance(exc, AgentpostError):
                    log.exception("write job raised; job rolled back")
                return (False, exc, []), []
            return (True, result, tx.wakeups), tx.deferred

    def _settle(self, batch: list[_Job], outcomes: list[_Outcome]) -> None:
        # One wake-up per event loop per batch, not one per job.
        per_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], _Outcome]]] = {}
        for (_fn, fut, loop, _order, _as), outcome in zip(batch, outcomes, strict=True):
            per_loop.setdefault(loop, []).append((fut, outcome))
        for loop, items in per_loop.items():
            try:
                loop.call_soon_threadsafe(self._resolve, items)
            except RuntimeError:
                log.warning("event loop closed before %d write results were delivered", len(items))

    def _resolve(self, items: list[tuple[asyncio.Future[Any], _Outcome]]) -> None:
        for fut, (ok, value, wakeups) in items:
            for key in wakeups:
                self.notify(key)
            if fut.cancelled():
                continue
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)


def _data(job: _Job) -> AsData:
    assert job[4] is not None
    return job[4]


def _groups(batch: list[_Job]) -> list[list[int]]:
    """The batch's job indexes in order, cut into runs: consecutive jobs as data for one runner form
    one run, every other job is a run of its own. Runs keep the batch's room order, so a group takes
    its rooms' locks where its jobs would have (docs/architecture.md#store)."""
    out: list[list[int]] = []
    for i, job in enumerate(batch):
        data = job[4]
        prev = batch[out[-1][-1]][4] if out else None
        if data is not None and prev is not None and prev.runner is data.runner:
            out[-1].append(i)
        else:
            out.append([i])
    return out
