"""The hub's SQLite WAL file does not keep the size of its longest burst for ever
(store/sqlite.py `WAL_SIZE_LIMIT`, docs/operations.md "Memory and disk over a long run"): a
reader holding its snapshot through a burst of writes lets the WAL grow past the limit; once
the reader is done, the next checkpoint that empties it cuts the file back to the limit."""

from __future__ import annotations

import os
from pathlib import Path

from agentpost.store.sqlite import WAL_SIZE_LIMIT, _connect


def test_a_burst_held_open_by_a_reader_is_cut_back_after_it(tmp_path: Path) -> None:
    db = tmp_path / "hub.sqlite3"
    writer = _connect(db)
    writer.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
    reader = _connect(db)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchone()  # holds its snapshot
    blob = os.urandom(64 * 1024)
    for _ in range(2 * WAL_SIZE_LIMIT // len(blob)):
        writer.execute("INSERT INTO t (body) VALUES (?)", (blob,))
    wal = db.with_name("hub.sqlite3-wal")
    grown = wal.stat().st_size
    assert grown > 1.5 * WAL_SIZE_LIMIT  # no checkpoint could reset the WAL under the reader
    reader.execute("COMMIT")
    writer.execute("DELETE FROM t WHERE id < 100")  # later writes: a checkpoint runs and empties
    writer.execute("PRAGMA wal_checkpoint(PASSIVE)")
    writer.execute("INSERT INTO t (body) VALUES (x'00')")  # the next writer resets the WAL
    assert wal.stat().st_size <= WAL_SIZE_LIMIT, (grown, wal.stat().st_size)
    writer.close()
    reader.close()
