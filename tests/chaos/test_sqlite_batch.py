"""The SQLite writer under a full disk (docs/deploy.md group commit): when SQLite rolls a
whole batch back by itself, no job of it is committed behind the caller's back and the
writer thread lives on. In-process engine on a real tmpfs: the batch layout must be exact."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from agentpost.core.errors import StorageUnavailable
from agentpost.store.sqlite import SQLiteEngine, SQLiteTx
from conftest import fill


def test_batch_rolled_back_by_sqlite_commits_no_job_and_writer_survives(tmpfs: Path) -> None:
    async def scenario() -> None:
        engine = SQLiteEngine(tmpfs / "hub.sqlite3")
        try:
            started, gate = threading.Event(), threading.Event()

            def blocker(tx: SQLiteTx) -> None:
                started.set()
                assert gate.wait(10)

            def spill(tx: SQLiteTx) -> None:
                # More than the page cache holds: SQLite spills to the WAL mid-job, gets
                # SQLITE_FULL and rolls the whole transaction back.
                tx.run("CREATE TABLE big (x BLOB)")
                tx.run("INSERT INTO big VALUES (?)", (os.urandom(3 * 1024 * 1024),))

            def small(tx: SQLiteTx) -> None:
                tx.run("CREATE TABLE small (x)")
                tx.run("INSERT INTO small VALUES (1)")

            first = asyncio.ensure_future(engine.write(blocker))
            # The writer runs `blocker` as a batch of its own; what comes next waits.
            assert await asyncio.to_thread(started.wait, 10)
            fill(tmpfs / "ballast")
            second = asyncio.ensure_future(engine.write(spill))
            third = asyncio.ensure_future(engine.write(small))
            await asyncio.sleep(0)  # both are queued now: the next batch is exactly them
            gate.set()
            # Bounded: a dead writer thread would leave these futures pending forever.
            await asyncio.wait_for(first, 10)
            for fut in (second, third):
                with pytest.raises(StorageUnavailable):
                    await asyncio.wait_for(fut, 10)
            tables = await engine.read(
                lambda db: db.all("SELECT name FROM sqlite_master WHERE name IN ('big', 'small')")
            )
            assert tables == [], "a job reported as failed was committed"
            (tmpfs / "ballast").unlink()
            await asyncio.wait_for(engine.write(small), 10)
            assert await engine.read(lambda db: db.all("SELECT x FROM small")) == [(1,)]
        finally:
            await engine.close()

    asyncio.run(scenario())
