"""The origin totals of chains (docs/delegation.md "Cause") are forgotten by the hub's sweep
once a month old, in batches, on a real SQLite store; a younger one is kept."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentpost.hub.routing import fences
from agentpost.store import fences as store
from agentpost.store.sqlite import SQLiteEngine


def test_a_month_old_origin_total_is_forgotten_and_a_young_one_kept(tmp_path: Path) -> None:
    async def run() -> tuple[int, int, int, int]:
        engine = SQLiteEngine(tmp_path / "hub.sqlite3")
        now = 100 * fences.ORIGIN_KEEP_MS
        old, young = now - fences.ORIGIN_KEEP_MS - 1, now - 1000
        try:
            await engine.write(lambda tx: store.spend_origin(tx, "ev_old", 3, 24, old))
            await engine.write(lambda tx: store.spend_origin(tx, "ev_young", 2, 24, young))
            forgotten = await engine.write(lambda tx: fences.forget_origins(tx, now))
            again = await engine.write(lambda tx: fences.forget_origins(tx, now))
            left_old = await engine.read(lambda db: store.origin_spent(db, "ev_old"))
            left_young = await engine.read(lambda db: store.origin_spent(db, "ev_young"))
        finally:
            await engine.close()
        return forgotten, again, left_old, left_young

    assert asyncio.run(run()) == (1, 0, 0, 2)


def test_a_total_admits_up_to_its_size_and_never_more(tmp_path: Path) -> None:
    async def run() -> list[bool]:
        engine = SQLiteEngine(tmp_path / "hub.sqlite3")
        try:
            return [
                await engine.write(lambda tx, n=n: store.spend_origin(tx, "ev_a", n, 5, 1))
                for n in (2, 3, 1)
            ]
        finally:
            await engine.close()

    assert asyncio.run(run()) == [True, True, False]
