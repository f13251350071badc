"""An expired key renewed by two hub processes at once makes one new event
(docs/architecture.md#one-key-one-event, docs/architecture.md#many-hub-processes).

Both processes find the expired record and both try to renew it; a barrier inside the
store's delete makes them collide every time. The loser must answer from the winner's
record, not post a second event. PostgreSQL only: two writers on one SQLite file cannot be.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
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


@dataclass
class ExpiredKey:
    """A room, its member alice, and her post under key "k", whose record has expired: the
    next post with "k" renews it (docs/architecture.md#one-key-one-event)."""

    alice: Any
    room_id: str
    fp: str
    first: Any

    def create(self, tx: Tx) -> Any:
        return posting.create_message(tx, self.room_id, self.alice, dict(BODY))


BODY: dict[str, Any] = {
    "text": "hello",
    "metadata": {},
    "in_reply_to": None,
    "reply_kind": None,
    "attachments": [],
}


async def _expired_key(one: Any) -> ExpiredKey:
    def setup(tx: Tx) -> tuple[Any, str]:
        ws = members.create_workspace(tx, "acme")
        alice = members.create_member(tx, ws, "alice", "human", None)
        room = rooms.create_room(tx, ws.id, "general", "channel", "dynamic", None, None, False)
        rooms.add_participant(tx, room.id, alice.id)
        return alice, room.id

    alice, room_id = await one.write(setup)
    fp = fingerprint("POST /v1/rooms/{room}/messages", room_id, BODY)
    key = ExpiredKey(alice, room_id, fp, None)
    key.first = await Idempotency(one, 3600, 5).run(alice.id, "k", fp, key.create)
    assert key.first.idempotency_status == "created"
    await one.write(
        lambda tx: tx.run("UPDATE idempotency_keys SET created_at = created_at - 7200000")
    )
    return key


async def _race(dsn: str, engine_cls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = engine_cls(dsn, writers=1), engine_cls(dsn, writers=1)
    try:
        k = await _expired_key(one)
        alice, room_id, fp, create, first = k.alice, k.room_id, k.fp, k.create, k.first

        barrier = threading.Barrier(2, timeout=20)
        real_delete = keys.delete_expired

        def delete_together(db: Any, member_id: str, key: str, cutoff: int) -> None:
            barrier.wait()  # both writers have seen the expired record
            real_delete(db, member_id, key, cutoff)

        monkeypatch.setattr(idem_module.keys, "delete_expired", delete_together)
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


def test_a_renewal_committed_before_the_others_delete_is_not_deleted(
    engine: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interleaving a loaded machine makes: process B has read the expired record and is
    about to delete it; process A deletes it, renews the key, posts and commits first. B's
    delete, a new statement, sees A's fresh record: it must leave it, and B answers from it
    (replayed), not post the same key again (found by a loaded CI run: two `created`)."""
    if engine is None:
        pytest.skip("two writer processes share a database on PostgreSQL only")
    from agentpost.store.postgres import PostgresEngine

    asyncio.run(_late_delete(engine, PostgresEngine, monkeypatch))


async def _late_delete(dsn: str, engine_cls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = engine_cls(dsn, writers=1), engine_cls(dsn, writers=1)
    try:
        k = await _expired_key(one)
        alice, room_id, fp, create, first = k.alice, k.room_id, k.fp, k.create, k.first
        real_delete = keys.delete_expired
        b_at_delete, b_go = threading.Event(), threading.Event()
        b_thread: list[threading.Thread] = []

        def delete_late_for_b(db: Any, member_id: str, key: str, cutoff: int) -> None:
            if b_thread and threading.current_thread() is b_thread[0]:
                b_at_delete.set()
                assert b_go.wait(20)
            real_delete(db, member_id, key, cutoff)

        monkeypatch.setattr(idem_module.keys, "delete_expired", delete_late_for_b)

        async def as_b() -> Any:
            # B's writer thread is the one that runs its jobs: name it by its first job.
            b_thread.append(await two.write(lambda tx: threading.current_thread()))
            return await Idempotency(two, 3600, 5).run(alice.id, "k", fp, create)

        b_task = asyncio.ensure_future(as_b())
        assert await asyncio.to_thread(b_at_delete.wait, 20)  # B read the expired record
        a = await Idempotency(one, 3600, 5).run(alice.id, "k", fp, create)  # A commits
        b_go.set()
        b = await b_task
        assert (a.idempotency_status, b.idempotency_status) == ("created", "replayed")
        assert a.body == b.body != first.body
        stored = await one.read(lambda db: events.page(db, room_id, 0, 100))
        assert len(stored) == 2  # the first post and one renewal, not two
    finally:
        await one.close()
        await two.close()


def test_a_record_swept_between_the_claim_and_the_read_is_claimed_again(
    engine: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process's sweep commits the deletion of the expired record after our claim
    ran into it and before we read it: we read nothing, claim again and post, once (it was
    an assert, a 500 `internal`)."""
    if engine is None:
        pytest.skip("two writer processes share a database on PostgreSQL only")
    from agentpost.store.postgres import PostgresEngine

    asyncio.run(_swept_between(engine, PostgresEngine, monkeypatch))


async def _swept_between(dsn: str, engine_cls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    one = engine_cls(dsn, writers=1)
    try:
        k = await _expired_key(one)
        alice, room_id, fp, create, first = k.alice, k.room_id, k.fp, k.create, k.first
        real_get = keys.get
        swept: list[int] = []

        def get_after_a_sweep(db: Any, member_id: str, key: str) -> Any:
            if not swept:  # the other process's sweep, committed in between
                with psycopg.connect(dsn, autocommit=True) as other:
                    gone = other.execute(
                        "DELETE FROM idempotency_keys WHERE member_id = %s AND key = %s",
                        (member_id, key),
                    )
                    swept.append(gone.rowcount)
            return real_get(db, member_id, key)

        monkeypatch.setattr(idem_module.keys, "get", get_after_a_sweep)
        again = await Idempotency(one, 3600, 5).run(alice.id, "k", fp, create)
        assert swept == [1]
        assert again.idempotency_status == "created" and again.body != first.body
        stored = await one.read(lambda db: events.page(db, room_id, 0, 100))
        assert len(stored) == 2
    finally:
        await one.close()
