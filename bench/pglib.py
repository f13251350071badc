"""PostgreSQL for the bench: a fresh database per run, and what its backends wait on.

Each run gets its own `bench_<pid>` database on the server named by `--db`, dropped at the
end, so figures never depend on an earlier run's tables. `ActivitySampler` polls
`pg_stat_activity` (pg_stat_statements needs a server restart on the shared server).
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql


def with_dbname(url: str, dbname: str) -> str:
    """`url` with its database path replaced (query string, user and host kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + dbname))


@contextmanager
def fresh_database(url: str, suffix: str = "") -> Iterator[tuple[str, str]]:
    """CREATE DATABASE bench_<pid><suffix> next to `url`'s; yields (its URL, its name);
    drops it."""
    name = f"bench_{os.getpid()}{suffix}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield with_dbname(url, name), name
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def server_info(url: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True) as conn:
        out: dict[str, Any] = {}
        for setting in (
            "server_version",
            "synchronous_commit",
            "fsync",
            "wal_sync_method",
            "shared_buffers",
            "commit_delay",
        ):
            row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(setting))).fetchone()
            out[setting] = row[0] if row else None
        return out


class ActivitySampler:
    """Counts, every `interval` s, what the bench database's backends are doing:
    `state / wait_event_type:wait_event` per backend (idle = waiting for the hub)."""

    def __init__(self, url: str, dbname: str, interval: float = 0.02) -> None:
        self.url = url
        self.dbname = dbname
        self.interval = interval
        self.counts: Counter[str] = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ActivitySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        q = (
            "SELECT state, wait_event_type, wait_event, left(query, 40) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()"
        )
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.is_set():
                for state, wtype, wevent, query in conn.execute(q, (self.dbname,)).fetchall():
                    if state == "active":
                        what = f"active {wtype}:{wevent}" if wtype else "active on CPU"
                        what += f" [{' '.join((query or '').split()[:2])}]"
                    else:
                        what = f"{state} {wtype}:{wevent}" if wtype else str(state)
                    self.counts[what] += 1
                self.samples += 1
                self._stop.wait(self.interval)

    def report(self, top: int = 12) -> dict[str, Any]:
        """Average backends per state (sum of counts / samples), largest first."""
        n = max(self.samples, 1)
        return {
            "samples": self.samples,
            "avg_backends": {k: round(v / n, 2) for k, v in self.counts.most_common(top)},
        }


def db_stats(url: str, dbname: str) -> dict[str, int]:
    """pg_stat_database counters of the bench database (backends flush them about once a
    second, so read them a second after a phase)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit, xact_rollback, deadlocks, tup_inserted, tup_updated"
            " FROM pg_stat_database WHERE datname = %s",
            (dbname,),
        ).fetchone()
    names = ("xact_commit", "xact_rollback", "deadlocks", "tup_inserted", "tup_updated")
    return dict(zip(names, row or (0,) * len(names), strict=True))
