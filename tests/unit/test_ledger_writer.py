"""The ledger's group commit (connect/ledgerwriter.py): writes nobody waits for ride the next
awaited write's commit (no fsync of their own), linger at most `LINGER` without one, keep
their order, are committed by a stop, and a failing one fails alone."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from agentpost.connect import ledgerwriter
from agentpost.connect.ledgerwriter import LedgerWriter


class Traced:
    def __init__(self, path: Path) -> None:
        self.commits: list[float] = []
        conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("CREATE TABLE t (n INTEGER)")
        conn.set_trace_callback(self._trace)
        self.writer = LedgerWriter(conn)
        self.path = path

    def _trace(self, sql: str) -> None:
        if sql == "COMMIT":
            self.commits.append(time.monotonic())

    def rows(self) -> list[int]:
        with closing(sqlite3.connect(self.path)) as db:
            return [r[0] for r in db.execute("SELECT n FROM t ORDER BY rowid")]


def insert(n: int) -> ledgerwriter.WriteJob:
    return lambda db: db.execute("INSERT INTO t VALUES (?)", (n,))


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[Traced]:
    t = Traced(tmp_path / "l.sqlite3")
    yield t
    t.writer.stop()


def test_unawaited_writes_ride_the_next_awaited_commit(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledgerwriter, "LINGER", 5.0)  # longer than this test can take
    for n in range(5):
        traced.writer.submit(insert(n))

    async def awaited() -> None:
        await traced.writer.run(insert(5))

    asyncio.run(awaited())
    assert traced.rows() == [0, 1, 2, 3, 4, 5]  # in the order queued
    assert len(traced.commits) == 1  # one commit, one fsync, for all six


def test_unawaited_writes_alone_commit_within_linger(traced: Traced) -> None:
    t0 = time.monotonic()
    traced.writer.submit(insert(1))
    deadline = t0 + 5
    while not traced.rows() and time.monotonic() < deadline:
        time.sleep(0.005)
    assert traced.rows() == [1]
    assert len(traced.commits) == 1
    assert traced.commits[0] - t0 >= ledgerwriter.LINGER * 0.9  # it waited for company
    assert traced.commits[0] - t0 < ledgerwriter.LINGER + 1.0  # and not much longer


def test_a_stop_commits_what_lingers(tmp_path: Path) -> None:
    t = Traced(tmp_path / "l.sqlite3")
    for n in range(3):
        t.writer.submit(insert(n))
    t.writer.stop()
    assert t.rows() == [0, 1, 2]


def test_an_awaited_write_does_not_wait_for_the_linger(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledgerwriter, "LINGER", 5.0)
    traced.writer.submit(insert(1))

    async def awaited() -> float:
        t = time.monotonic()
        await traced.writer.run(insert(2))
        return time.monotonic() - t

    took = asyncio.run(awaited())
    assert traced.rows() == [1, 2]
    assert took < 2.5  # it ended the 5 s linger, it did not sit it out
    assert len(traced.commits) == 1


def test_writes_waiting_behind_a_commit_share_the_next_one(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a batch commits, one write nobody waits for and 16 awaited ones queue up: the
    next batch takes all of them at once (one commit, one fsync), not the first awaited one
    alone."""
    monkeypatch.setattr(ledgerwriter, "LINGER", 5.0)
    started, release = threading.Event(), threading.Event()

    def slow(db: sqlite3.Connection) -> None:
        started.set()
        release.wait(10)
        db.execute("INSERT INTO t VALUES (-1)")

    async def scenario() -> None:
        first = asyncio.ensure_future(traced.writer.run(slow))
        assert await asyncio.to_thread(started.wait, 10)
        traced.writer.submit(insert(0))
        rest = [asyncio.ensure_future(traced.writer.run(insert(n))) for n in range(1, 17)]
        await asyncio.sleep(0)  # each task runs to its await: all 16 are on the queue
        release.set()
        await asyncio.gather(first, *rest)

    asyncio.run(scenario())
    assert sorted(traced.rows()) == list(range(-1, 17))
    assert len(traced.commits) == 2  # the slow batch, then everything that waited


def test_submits_from_several_threads_all_commit(traced: Traced) -> None:
    """`submit` is safe from any thread: none of their wake-ups is lost, so every write
    reaches the disk without an awaited one to carry it."""
    def many(base: int) -> None:
        for n in range(base, base + 200):
            traced.writer.submit(insert(n))

    threads = [threading.Thread(target=many, args=(k * 1000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = sorted(n for k in range(4) for n in range(k * 1000, k * 1000 + 200))
    deadline = time.monotonic() + 10
    while len(traced.rows()) < len(want) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(traced.rows()) == want


def test_a_failing_write_in_a_batch_fails_alone(traced: Traced) -> None:
    """Queued behind a commit, four writes share a batch and one of them fails: it gets its
    own error, the other three (awaited or not) are committed."""
    started, release = threading.Event(), threading.Event()

    def slow(db: sqlite3.Connection) -> None:
        started.set()
        release.wait(10)
        db.execute("INSERT INTO t VALUES (-1)")

    def broken(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO no_such_table VALUES (1)")

    async def scenario() -> list[Any]:
        first = asyncio.ensure_future(traced.writer.run(slow))
        assert await asyncio.to_thread(started.wait, 10)
        jobs = [asyncio.ensure_future(traced.writer.run(fn)) for fn in (insert(1), broken, insert(2))]
        traced.writer.submit(insert(3))
        await asyncio.sleep(0)  # each task runs to its await: all are on the queue
        release.set()
        await first
        return await asyncio.gather(*jobs, return_exceptions=True)

    ok1, failed, ok2 = asyncio.run(scenario())
    assert isinstance(failed, sqlite3.OperationalError) and "no_such_table" in str(failed)
    assert not isinstance(ok1, BaseException) and not isinstance(ok2, BaseException)
    deadline = time.monotonic() + 5
    while len(traced.rows()) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(traced.rows()) == [-1, 1, 2, 3]
