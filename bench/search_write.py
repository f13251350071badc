"""What the search index costs an event's write, in CPU, without a hub (issue 16 "Speed").

On a shared machine a throughput A/B of two hubs swings by more than the index could cost
(bench/README.md), so this measures the write itself: a fresh SQLite file with every
shipped migration, events written by the store's own `events.insert` in transactions of
`--batch` (the group commit's), with the FTS5 index as shipped (`on`) and with the
`event_search` table dropped and the insert of its row skipped (`off`), alternated per
round; CPU time of this process (user + system) per event, medians over rounds.

    .venv/bin/python bench/search_write.py [--events 20000] [--batch 8] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from agentpost.store import events, migrate
from agentpost.store.engine import Params
from agentpost.store.sqlite import SQLiteDb


class _NoIndex(SQLiteDb):
    """The write path with the index off: the FTS5 row's insert is not sent."""

    def run(self, sql: str, params: Params = ()) -> int:
        if sql.startswith("INSERT INTO event_search"):
            return 0
        return super().run(sql, params)


def fresh(path: Path, index: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    for version, sql in migrate.pending(SQLiteDb(conn)):
        for stmt in migrate.statements(sql):
            conn.execute(stmt)
        conn.execute("INSERT INTO schema_version VALUES (?)", (version,))
    if not index:
        conn.execute("DROP TABLE event_search")
    return conn


def one(path: Path, index: bool, n: int, batch: int, rng: random.Random) -> float:
    conn = fresh(path, index)
    db = SQLiteDb(conn) if index else _NoIndex(conn)
    words = [f"w{i}" for i in range(5000)]
    started = time.process_time()
    for b in range(n // batch):
        conn.execute("BEGIN IMMEDIATE")
        for i in range(batch):
            seq = b * batch + i + 1
            text = f"bench k{seq} " + " ".join(rng.choices(words, k=8))
            body = json.dumps({"id": f"ev_{seq:026d}", "seq": seq, "text": text}).encode()
            events.insert(db, "rm_bench", seq, f"ev_{seq:026d}", body, text, sender_id=None)
        conn.execute("COMMIT")
    spent = time.process_time() - started
    conn.close()
    return spent / n * 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--events", type=int, default=20000)
    p.add_argument("--batch", type=int, default=8, help="events per transaction (8)")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    rng = random.Random(16)
    got: dict[str, list[float]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory(prefix="agentpost-search-write-") as tmp:
        for r in range(args.rounds):
            for mode in ("off", "on") if r % 2 == 0 else ("on", "off"):
                path = Path(tmp) / f"{mode}{r}.sqlite3"
                got[mode].append(one(path, mode == "on", args.events, args.batch, rng))
    off, on = statistics.median(got["off"]), statistics.median(got["on"])
    report = {
        "settings": vars(args),
        "loadavg": Path("/proc/loadavg").read_text().strip(),
        "cpu_us_per_event": {"off": round(off, 1), "on": round(on, 1)},
        "index_us_per_event": round(on - off, 1),
        "rounds": {k: [round(v, 1) for v in vs] for k, vs in got.items()},
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
