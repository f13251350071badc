"""An expired key renewed by two hub processes at once makes one new event (§3, §8).

Both processes find the expired record and both try to renew it; a barrier inside the
store's delete makes them collide every time. The loser must answer from the winner's
record, not post a second event. PostgreSQL only: two writers on one SQLite file cannot be.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from agentpost.hub import idempotency as idem_module
from agentpost.hub import posting
from agentpost.hub.idempotency import Idempotency, fingerprint
from agentpost.store import events, keys, members, rooms
from agentpost.store.engine import Tx


def test_expired_key_renewed_by_two_processes_makes_one_event(
    engine: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if engine is None:
        pytest.skip("two writer processes share a database on PostgreSQL only")
    from agentpost.store.postgres import PostgresEngine

    asyncio.run(_race(engine, PostgresEngine, monkeypatch))


async def _race(dsn: str, engine_cls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = engine_cls(dsn, writers=1), engine_cls(dsn, writers=1)
    try:

        def setup(tx: Tx) -> tuple[Any, str]:
            ws = members.create_workspace(tx, "acme")
            alice = members.create_member(tx, ws, "alice", "human", None)
            room = rooms.create_room(tx, ws.id, "general", "channel", "dynamic", None, None, False)
            rooms.add_participant(tx, room.id, alice.id)
            return alice, room.id

        alice, room_id = await one.write(setup)
        body = {
            "text": "hello",
            "metadata": {},
            "in_reply_to": None,
            "reply_kind": None,
            "attachments": [],
        }
        fp = fingerprint("POST /v1/rooms/{room}/messages", room_id, body)

        def create(tx: Tx) -> Any:
            return posting.create_message(tx, room_id, alice, body)

        first = await Idempotency(one, 3600, 5).run(alice.id, "k", fp, create)
        assert first.idempotency_status == "created"
        await one.write(
            lambda tx: tx.run("UPDATE idempotency_keys SET created_at = created_at - 7200000")
        )

        barrier = threading.Barrier(2, timeout=20)
        real_delete = keys.delete

        def delete_together(db: Any, member_id: str, key: str) -> None:
            barrier.wait()  # both writers have seen the expired record
            real_delete(db, member_id, key)

        monkeypatch.setattr(idem_module.keys, "delete", delete_together)
        a, b = await asyncio.gather(
            Idempotency(one, 3600, 5).run(alice.id, "k", fp, create),
            Idempotency(two, 3600, 5).run(alice.id, "k", fp, create),
        )
        assert sorted([a.idempotency_status, b.idempotency_status]) == ["created", "replayed"]
        assert a.body == b.body != first.body
        stored = await one.read(lambda db: events.page(db, room_id, 0, 100))
        assert len(stored) == 2  # the first post and one renewal, not two
    finally:
        await one.close()
        await two.close()
