"""The token cache on a shared database (hub/auth.py `TokenCache`): a message post may take
its member from a cached hint, and the write transaction checks it again, so a removal or a
token reissue by any process, or straight in the database with no wake-up at all, is refused
on the very next post, and nothing is written (docs/architecture.md#many-hub-processes,
docs/api.md)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import httpx
import psycopg
import pytest

from hubproc import HubProcess, Setup, make_setup

ADMIN = {"AGENTPOST_ADMIN_TOKEN": "admin-of-both"}


def _two_hubs(engine: str | None, make_hub: Callable[..., HubProcess]) -> tuple[Setup, HubProcess]:
    if engine is None:
        pytest.skip("several hub processes share a database on PostgreSQL only")
    a, b = make_hub("a", env=ADMIN), make_hub("b", env=ADMIN)
    return make_setup(a, ["alice", "carol"], ["bot"]), b


def _post(c: httpx.Client, room: str, text: str, key: str | None = None) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    return c.post(f"/v1/rooms/{room}/messages", json={"text": text}, headers=headers)


def _seqs(setup: Setup) -> list[int]:
    with setup.hub.client(setup.tokens["carol"]) as carol:
        r = carol.get(f"/v1/rooms/{setup.room}/events", params={"after": 0})
        assert r.status_code == 200, r.text
        return [e["seq"] for e in r.json()["events"]]


def _warm(b: HubProcess, setup: Setup) -> str:
    """Alice posts through b twice (the second from b's cached hint); the key of the first."""
    key = str(uuid.uuid4())
    with b.client(setup.tokens["alice"]) as alice:
        assert _post(alice, setup.room, "one", key).status_code == 201
        assert _post(alice, setup.room, "two", str(uuid.uuid4())).status_code == 201
    return key


@pytest.mark.parametrize("shape", ["plain keyed", "mention", "unkeyed", "replay"])
def test_a_removal_straight_in_the_database_is_refused_by_a_process_that_cached_the_token(
    engine: str | None, make_hub: Callable[..., HubProcess], shape: str
) -> None:
    """No NOTIFY reaches b (the status changes in SQL): b's hint is wrong, and the write
    transaction, or the fresh read before a replay, refuses anyway."""
    setup, b = _two_hubs(engine, make_hub)
    key = _warm(b, setup)
    before = _seqs(setup)
    with psycopg.connect(setup.hub.db_url, autocommit=True) as pg:
        pg.execute("UPDATE members SET status = 'removed' WHERE name = 'alice'")
    with b.client(setup.tokens["alice"]) as alice:
        r = {
            "plain keyed": lambda: _post(alice, setup.room, "three", str(uuid.uuid4())),
            "mention": lambda: _post(alice, setup.room, "@bot three", str(uuid.uuid4())),
            "unkeyed": lambda: _post(alice, setup.room, "three"),
            "replay": lambda: _post(alice, setup.room, "one", key),
        }[shape]()
    assert (r.status_code, r.json()["error"]["code"]) == (403, "member_removed"), r.text
    assert _seqs(setup) == before


def test_a_token_replaced_straight_in_the_database_is_refused_at_once(
    engine: str | None, make_hub: Callable[..., HubProcess]
) -> None:
    setup, b = _two_hubs(engine, make_hub)
    _warm(b, setup)
    before = _seqs(setup)
    with psycopg.connect(setup.hub.db_url, autocommit=True) as pg:
        pg.execute(
            "DELETE FROM tokens WHERE member_id = (SELECT id FROM members WHERE name = 'alice')"
        )
    with b.client(setup.tokens["alice"]) as alice:
        for text in ("plain", "@bot mention"):
            r = _post(alice, setup.room, text, str(uuid.uuid4()))
            assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized"), r.text
    assert _seqs(setup) == before


def test_a_reissue_through_one_process_ends_the_old_token_on_the_other(
    engine: str | None, make_hub: Callable[..., HubProcess]
) -> None:
    setup, b = _two_hubs(engine, make_hub)
    _warm(b, setup)
    with setup.hub.client(setup.hub.admin_token) as admin:
        r = admin.post("/v1/admin/workspaces/acme/members/alice/token")
        assert r.status_code == 200, r.text
        fresh = r.json()["token"]
    with b.client(setup.tokens["alice"]) as old:
        r = _post(old, setup.room, "old token", str(uuid.uuid4()))
        assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized"), r.text
    with b.client(fresh) as new:
        assert _post(new, setup.room, "new token", str(uuid.uuid4())).status_code == 201


def test_a_removal_through_one_process_is_refused_by_the_other_on_its_next_post(
    engine: str | None, make_hub: Callable[..., HubProcess]
) -> None:
    setup, b = _two_hubs(engine, make_hub)
    _warm(b, setup)
    before = _seqs(setup)
    with setup.hub.client(setup.hub.admin_token) as admin:
        assert admin.delete("/v1/admin/workspaces/acme/members/alice").status_code == 200
    with b.client(setup.tokens["alice"]) as alice:
        r = _post(alice, setup.room, "after removal", str(uuid.uuid4()))
    assert (r.status_code, r.json()["error"]["code"]) == (403, "member_removed"), r.text
    assert _seqs(setup) == before


def test_a_member_still_posts_through_its_cached_hint_after_another_is_removed(
    engine: str | None, make_hub: Callable[..., HubProcess]
) -> None:
    """The wake-up of one removal drops only that member from b's cache."""
    setup, b = _two_hubs(engine, make_hub)
    _warm(b, setup)
    with setup.hub.client(setup.hub.admin_token) as admin:
        assert admin.delete("/v1/admin/workspaces/acme/members/carol").status_code == 200
    with b.client(setup.tokens["alice"]) as alice:
        posted = [_post(alice, setup.room, f"m{i}", str(uuid.uuid4())) for i in range(3)]
    assert [r.status_code for r in posted] == [201, 201, 201]
    with setup.hub.client(setup.tokens["alice"]) as alice:
        r = alice.get(f"/v1/rooms/{setup.room}/events", params={"after": 0})
    assert [e["text"] for e in r.json()["events"]][-3:] == ["m0", "m1", "m2"]
