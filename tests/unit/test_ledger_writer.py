"""The ledger's writes and group fsync (connect/ledgerwriter.py): an awaited write returns
only after an fdatasync of the WAL that began after its commit; writes in flight share one;
a write nobody waits for is synced within the linger; a failed sync refuses everything
after it; a failing write leaves nothing; checkpoints keep the WAL from growing."""

from __future__ import annotations

import asyncio
import errno
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from agentpost.connect import ledgerwriter
from agentpost.connect.ledger import Entry, Ledger, LedgerUnavailable
from agentpost.connect.ledgerwriter import LedgerBroken, LedgerWriter


class Recorded:
    """What happened, in order: ("commit", n), ("sync", written when it began), ("synced", n)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, writer: LedgerWriter) -> None:
        self.events: list[tuple[str, int]] = []
        self.fail: OSError | None = None
        real = os.fdatasync

        def fdatasync(fd: int) -> None:
            self.events.append(("sync", writer._written))
            if self.fail is not None:
                raise self.fail
            real(fd)
            self.events.append(("synced", writer._written))

        monkeypatch.setattr(ledgerwriter.os, "fdatasync", fdatasync)

    def syncs(self) -> int:
        return sum(1 for kind, _ in self.events if kind == "sync")


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[LedgerWriter]:
    path = tmp_path / "l.sqlite3"
    with closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE t (n INTEGER UNIQUE)")
    w = LedgerWriter(path, 5000)
    yield w
    w.stop()


def insert(n: int) -> ledgerwriter.Callable[[sqlite3.Connection], object]:
    return lambda db: db.execute("INSERT INTO t VALUES (?)", (n,))


def rows(path: Path) -> list[int]:
    with closing(sqlite3.connect(path)) as db:
        return [r[0] for r in db.execute("SELECT n FROM t ORDER BY n")]


def test_an_awaited_write_returns_after_an_fsync_that_began_after_its_commit(
    writer: LedgerWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorded(monkeypatch, writer)

    async def one(n: int) -> None:
        writer.write(insert(n))
        committed = writer._written
        rec.events.append(("commit", committed))
        await writer.durable()
        began = [w for kind, w in rec.events if kind == "synced"]
        assert began and max(began) >= committed  # a finished sync covered this commit
        rec.events.append(("answered", committed))

    asyncio.run(one(1))
    kinds = [kind for kind, _ in rec.events]
    assert kinds == ["commit", "sync", "synced", "answered"]
    assert rows(writer.path) == [1]


def test_writes_in_flight_share_one_fsync(
    writer: LedgerWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorded(monkeypatch, writer)

    async def one(n: int) -> None:
        writer.write(insert(n))
        await writer.durable()

    async def sixteen() -> None:
        await asyncio.gather(*(one(n) for n in range(16)))

    asyncio.run(sixteen())
    assert rec.syncs() == 1
    assert rows(writer.path) == list(range(16))


def test_a_write_nobody_waits_for_is_synced_within_the_linger(
    writer: LedgerWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = Recorded(monkeypatch, writer)

    async def lazy() -> float:
        writer.write(insert(7))
        t0 = time.monotonic()
        deadline = t0 + 10
        while rec.syncs() == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        return time.monotonic() - t0

    took = asyncio.run(lazy())
    assert rec.syncs() == 1
    assert took < ledgerwriter.LINGER + 1.0
    assert writer._synced == writer._written == 1


def test_a_failed_sync_refuses_every_later_write_wait_and_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(tmp_path / "deliveries.sqlite3")
    ledger.open()
    assert ledger._writer is not None
    rec = Recorded(monkeypatch, ledger._writer)
    rec.fail = OSError(errno.EIO, "Input/output error")
    entry = Entry("d1", "w.b", "room", "w", [{"type": "text", "text": "hi"}], first_seen=1.0)

    with pytest.raises(LedgerUnavailable, match="syncing the ledger failed"):
        asyncio.run(ledger.first_seen(entry))
    rec.fail = None  # the disk is fine again: the ledger still refuses until a restart
    with pytest.raises(LedgerUnavailable):
        ledger.get("d1")  # committed, but not known to be on disk: never read as there
    with pytest.raises(LedgerUnavailable):
        asyncio.run(ledger.first_seen(Entry("d2", "w.b", "room", "w", [], first_seen=1.0)))
    with pytest.raises(LedgerBroken):
        asyncio.run(ledger._writer.durable())
    ledger.close()

    again = Ledger(tmp_path / "deliveries.sqlite3")  # a restart reads what reached the disk
    again.open()
    got = again.get("d1")
    assert got is not None and got.binding == "w.b"
    assert again.get("d2") is None
    again.close()


def test_a_failing_write_leaves_nothing_and_the_next_one_commits(writer: LedgerWriter) -> None:
    writer.write(insert(1))

    def half_then_fail(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO t VALUES (2)")
        db.execute("INSERT INTO t VALUES (1)")  # UNIQUE

    with pytest.raises(sqlite3.IntegrityError):
        writer.write(half_then_fail)
    writer.write(insert(3))
    writer.durable_sync()
    assert rows(writer.path) == [1, 3]
    assert writer._written == writer._synced == 2


def test_durable_sync_from_other_threads(writer: LedgerWriter) -> None:
    errors: list[BaseException] = []

    def work(base: int) -> None:
        try:
            for n in range(base, base + 10):
                writer.write(insert(n))
                writer.durable_sync()
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(b,)) for b in (0, 100, 200, 300)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(rows(writer.path)) == 40
    assert writer._synced == writer._written == 40


def test_stop_syncs_what_nobody_waited_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "l.sqlite3"
    with closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE t (n INTEGER UNIQUE)")
    w = LedgerWriter(path, 5000)
    rec = Recorded(monkeypatch, w)
    w.write(insert(5))  # off any loop: no linger timer
    assert rec.syncs() == 0
    w.stop()
    assert rec.syncs() == 1
    assert rows(path) == [5]


def test_checkpoints_keep_the_wal_from_growing(
    writer: LedgerWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledgerwriter, "CHECKPOINT_EVERY", 20)
    wal = Path(f"{writer.path}-wal")

    async def many() -> None:
        for n in range(400):
            writer.write(lambda db, n=n: db.execute("INSERT INTO t VALUES (?)", (n,)))
            await writer.durable()
            if n % 20 == 0:  # let a checkpoint thread finish now and then
                deadline = time.monotonic() + 10
                while writer._checkpointing and time.monotonic() < deadline:
                    await asyncio.sleep(0.002)

    asyncio.run(many())
    # 400 commits of at least one 4 KiB frame each would make a WAL of 1.6 MB or more;
    # checkpoints let it restart from its beginning.
    assert wal.stat().st_size < 400 * 4096 // 4
    assert rows(writer.path) == list(range(400))
