"""`Ledger.counts` (what `connect status` shows as deliveries by outcome) counts in SQL what
`ledger.outcome` names row by row: delivered, final/<reason>, in_progress, a finished entry
whose result is unreadable or has no status."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from contextlib import closing
from pathlib import Path

from agentpost.connect.ledger import Entry, Ledger, outcome


def test_counts_agree_with_outcome_row_by_row(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "deliveries.sqlite3")
    ledger.open()
    results = [
        {"status": "delivered", "delivered": [0], "event_ids": ["ev"]},
        {"status": "final", "reason": "rejected", "data": {}},
        {"status": "final", "reason": "conflict", "data": {}},
        {"status": "final", "reason": "", "data": {}},
    ]

    async def fill() -> None:
        for i in range(60):
            e = Entry(f"d{i}", "w.b", "rm", "w", [{"type": "text", "text": "t"}], first_seen=time.time())
            await ledger.first_seen(e)
            if i % 6:  # every sixth stays in progress
                await ledger.finish(e, results[i % len(results)])

    try:
        asyncio.run(fill())
        with closing(sqlite3.connect(tmp_path / "deliveries.sqlite3")) as db, db:
            db.execute("UPDATE deliveries SET result = 'not json' WHERE id = 'd1'")
            db.execute("UPDATE deliveries SET result = '{}' WHERE id = 'd2'")
            db.execute("UPDATE deliveries SET result = NULL WHERE id = 'd3'")
            expected: dict[str, int] = {}
            for state, result in db.execute("SELECT state, result FROM deliveries"):
                key = outcome(state, result) or state
                expected[key] = expected.get(key, 0) + 1
        got = ledger.counts()
        assert got == expected
        assert {"unreadable", "finished", "in_progress", "delivered", "final/rejected"} <= set(got)
        assert sum(got.values()) == 60
    finally:
        ledger.close()
