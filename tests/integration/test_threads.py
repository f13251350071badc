"""Threads on a real hub (docs/threads.md): the one thread per owner and name, made once even
when asked at once (also from two hub processes on one PostgreSQL database); a key's send
state; a delivered key still replayed after its thread was archived; the Python client.

One hub per engine serves this module's tests, each in a workspace of its own; the test of two
hub processes on one database starts its own (`make_hub`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from agentpost.client import AsyncHubClient, HubClient, HubRefused
from hubproc import HubProcess, Setup, fresh_workspace, make_setup


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def ensure_path(workspace: str) -> str:
    return f"/v1/workspaces/{workspace}/threads/ensure"


def ensure(setup: Setup, who: str, name: str, owner: str | None = None) -> httpx.Response:
    body = {"name": name} if owner is None else {"name": name, "owner": owner}
    with setup.hub.client(setup.tokens[who]) as c:
        return c.post(ensure_path(setup.workspace), json=body)


def room(setup: Setup, who: str, room_id: str) -> dict:
    with setup.hub.client(setup.tokens[who]) as c:
        r = c.get(f"/v1/rooms/{room_id}")
        assert r.status_code == 200, r.text
        return r.json()["room"]


def rooms_named(setup: Setup, who: str, name: str) -> list[dict]:
    with setup.hub.client(setup.tokens[who]) as c:
        rooms = c.get(f"/v1/workspaces/{setup.workspace}/rooms").json()["rooms"]
        return [r for r in rooms if r["name"] == name]


def error_code(r: httpx.Response) -> str:
    return str(r.json()["error"]["code"])


def test_ensure_makes_the_thread_once_and_then_returns_it(setup: Setup) -> None:
    first = ensure(setup, "alice", "alice-home")
    assert first.status_code == 201, first.text
    body = first.json()
    assert set(body) == {"thread_id", "workspace", "name", "owner", "created"}
    assert (body["workspace"], body["name"], body["owner"], body["created"]) == (
        setup.workspace,
        "alice-home",
        "alice",
        True,
    )
    again = ensure(setup, "alice", "alice-home")
    assert again.status_code == 200
    assert again.json() == {**body, "created": False}
    made = room(setup, "alice", body["thread_id"])
    assert (made["kind"], made["owner"], made["participants"]) == ("thread", "alice", ["alice"])


def test_ensure_for_another_owner_makes_both_participants(setup: Setup) -> None:
    r = ensure(setup, "carol", "bot-home", owner="bot")
    assert r.status_code == 201, r.text
    assert r.json()["owner"] == "bot"
    assert room(setup, "bot", r.json()["thread_id"])["participants"] == ["bot", "carol"]
    # The owner asking later finds the same thread, and a third caller joins it.
    assert ensure(setup, "bot", "bot-home").json()["thread_id"] == r.json()["thread_id"]
    r = ensure(setup, "alice", "bot-home", owner="bot")
    assert r.status_code == 200 and r.json()["created"] is False
    assert room(setup, "bot", r.json()["thread_id"])["participants"] == ["alice", "bot", "carol"]


def test_an_archived_thread_is_unarchived_never_replaced(setup: Setup) -> None:
    tid = ensure(setup, "alice", "alice-home").json()["thread_id"]
    for _ in range(2):
        with setup.hub.client(setup.tokens["alice"]) as c:
            assert c.post(f"/v1/rooms/{tid}/archive").json()["room"]["archived"] is True
        r = ensure(setup, "alice", "alice-home")
        assert r.status_code == 200
        assert (r.json()["thread_id"], r.json()["created"]) == (tid, False)
        assert room(setup, "alice", tid)["archived"] is False
    assert len(rooms_named(setup, "alice", "alice-home")) == 1


def test_a_room_of_that_name_that_is_not_the_owners_thread_is_refused_and_left_alone(
    setup: Setup,
) -> None:
    # A channel of that name.
    r = ensure(setup, "alice", "general")
    assert (r.status_code, error_code(r)) == (409, "thread_conflict")
    general = room(setup, "alice", setup.room)
    assert (general["kind"], general["owner"], general["archived"]) == ("channel", None, False)
    # Another owner's thread, active and then archived: refused both times, never touched.
    theirs = ensure(setup, "bot", "shared-name").json()["thread_id"]
    for archived in (False, True):
        if archived:
            with setup.hub.client(setup.tokens["bot"]) as c:
                assert c.post(f"/v1/rooms/{theirs}/archive").status_code == 200
        r = ensure(setup, "alice", "shared-name")
        assert (r.status_code, error_code(r)) == (409, "thread_conflict")
        now = room(setup, "bot", theirs)
        assert (now["owner"], now["archived"], now["participants"]) == ("bot", archived, ["bot"])
    assert rooms_named(setup, "alice", "shared-name") == []


def test_unknown_workspace_unknown_owner_and_bad_names_are_refused(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post("/v1/workspaces/nowhere/threads/ensure", json={"name": "t"})
        assert (r.status_code, error_code(r)) == (404, "no_workspace")
        r = c.post(ensure_path(setup.workspace), json={"name": "t", "owner": "ghost"})
        assert (r.status_code, error_code(r), r.json()["error"]["field"]) == (
            400,
            "invalid_request",
            "$.owner",
        )
        for bad in [{"name": "Has Spaces"}, {}, {"name": "t", "extra": 1}]:
            r = c.post(ensure_path(setup.workspace), json=bad)
            assert (r.status_code, error_code(r)) == (400, "invalid_request"), bad
        r = c.post(
            ensure_path(setup.workspace),
            json={"name": "t"},
            headers={"Authorization": "Bearer nope"},
        )
        assert (r.status_code, error_code(r)) == (401, "unauthorized")
    # Another workspace of the same hub is not the caller's: no_workspace, nothing made.
    other = fresh_workspace()
    with setup.hub.client(setup.hub.admin_token) as admin:
        assert admin.post("/v1/admin/workspaces", json={"name": other}).status_code == 201
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post(ensure_path(other), json={"name": "t"})
        assert (r.status_code, error_code(r)) == (404, "no_workspace")


def test_concurrent_ensures_make_one_thread(setup: Setup) -> None:
    n = 12
    barrier = threading.Barrier(n)
    askers = ["alice", "carol", "bot", "helper"]

    def ask(i: int) -> httpx.Response:
        barrier.wait()
        return ensure(setup, askers[i % len(askers)], "the-one", owner="bot")

    with ThreadPoolExecutor(n) as pool:
        answers = list(pool.map(ask, range(n)))
    assert sorted(r.status_code for r in answers) == [200] * (n - 1) + [201]
    assert len({r.json()["thread_id"] for r in answers}) == 1
    assert [r.json()["created"] for r in answers].count(True) == 1
    made = room(setup, "bot", answers[0].json()["thread_id"])
    assert made["participants"] == sorted(askers)


def test_two_hub_processes_on_one_database_make_one_thread(
    engine: str | None, make_hub: Callable[..., HubProcess]
) -> None:
    if engine is None:
        pytest.skip("several hub processes share a database on PostgreSQL only")
    token = {"AGENTPOST_ADMIN_TOKEN": "admin-of-both"}
    a, b = make_hub("a", env=token), make_hub("b", env=token)
    s = make_setup(a, ["alice", "carol"], ["bot", "helper"])
    n = 16
    barrier = threading.Barrier(n)
    askers = ["alice", "carol", "bot", "helper"]

    def ask(i: int) -> httpx.Response:
        barrier.wait()
        with (a if i % 2 else b).client(s.tokens[askers[i % 4]]) as c:
            return c.post(ensure_path(s.workspace), json={"name": "the-one", "owner": "bot"})

    with ThreadPoolExecutor(n) as pool:
        answers = list(pool.map(ask, range(n)))
    assert sorted(r.status_code for r in answers) == [200] * (n - 1) + [201], [
        r.text for r in answers
    ]
    assert len({r.json()["thread_id"] for r in answers}) == 1
    with b.client(s.tokens["bot"]) as c:
        made = c.get(f"/v1/rooms/{answers[0].json()['thread_id']}").json()["room"]
    assert made["participants"] == sorted(askers)


def test_send_state_reports_the_record_to_its_sender_only(setup: Setup) -> None:
    tid = ensure(setup, "alice", "alice-home", owner="alice").json()["thread_id"]
    with setup.hub.client(setup.tokens["alice"]) as alice:
        r = alice.get(f"/v1/rooms/{tid}/sends", params={"key": "wake-1"})
        assert (r.status_code, error_code(r)) == (404, "send_not_found")
        posted = alice.post(
            f"/v1/rooms/{tid}/messages",
            json={"text": "  wake up \n"},
            headers={"Idempotency-Key": "wake-1"},
        )
        assert posted.status_code == 201
        r = alice.get(f"/v1/rooms/{tid}/sends", params={"key": "wake-1"})
        assert r.status_code == 200, r.text
        send = r.json()["send"]
        assert (send["key"], send["room"], send["state"], send["status"]) == (
            "wake-1",
            tid,
            "created",
            201,
        )
        assert send["event"] == posted.json()["event"]
        assert send["event"]["text"] == "wake up"
        assert send["response"] == posted.json()
        # Recorded for that room only.
        r = alice.get(f"/v1/rooms/{setup.room}/sends", params={"key": "wake-1"})
        assert (r.status_code, error_code(r)) == (404, "send_not_found")
        for bad in ["", "has space", "x" * 256]:
            r = alice.get(f"/v1/rooms/{tid}/sends", params={"key": bad})
            assert (r.status_code, error_code(r)) == (400, "invalid_idempotency_key"), bad
        r = alice.get(f"/v1/rooms/{tid}/sends")
        assert (r.status_code, error_code(r)) == (400, "invalid_request")
    # Keys are the member's own: another member with the same key has recorded nothing.
    ensure(setup, "bot", "alice-home", owner="alice")
    with setup.hub.client(setup.tokens["bot"]) as bot:
        r = bot.get(f"/v1/rooms/{tid}/sends", params={"key": "wake-1"})
        assert (r.status_code, error_code(r)) == (404, "send_not_found")


def test_a_delivered_key_replays_after_the_thread_was_archived(setup: Setup) -> None:
    tid = ensure(setup, "alice", "alice-home").json()["thread_id"]
    url = f"/v1/rooms/{tid}/messages"
    with setup.hub.client(setup.tokens["alice"]) as alice:
        first = alice.post(url, json={"text": "wake"}, headers={"Idempotency-Key": "k"})
        assert first.status_code == 201
        assert alice.post(f"/v1/rooms/{tid}/archive").status_code == 200
        again = alice.post(url, json={"text": "wake"}, headers={"Idempotency-Key": "k"})
        assert (again.status_code, again.headers["idempotency-status"]) == (201, "replayed")
        assert again.content == first.content
        other = alice.post(url, json={"text": "other"}, headers={"Idempotency-Key": "k"})
        assert (other.status_code, error_code(other)) == (422, "idempotency_conflict")
        new = alice.post(url, json={"text": "wake"}, headers={"Idempotency-Key": "k2"})
        assert (new.status_code, error_code(new)) == (409, "room_archived")
        r = alice.get(f"/v1/rooms/{tid}/sends", params={"key": "k"})
        assert (
            r.status_code == 200 and r.json()["send"]["event"]["id"] == first.json()["event"]["id"]
        )
        r = alice.get(f"/v1/rooms/{tid}/sends", params={"key": "k2"})
        assert (r.status_code, error_code(r)) == (404, "send_not_found")
        events = alice.get(f"/v1/rooms/{tid}/events").json()["events"]
    assert [e["text"] for e in events] == ["wake"]


def test_the_sync_client_sends_once_per_key(setup: Setup) -> None:
    with HubClient(setup.hub.url, setup.tokens["bot"]) as c:
        t = c.ensure_thread(setup.workspace, "bot-home")
        assert (t.owner, t.created) == ("bot", True)
        first = c.thread_send(t.thread_id, "wake 1", key="wake-1")
        again = c.thread_send("bot-home", "wake 1\n", key="wake-1")  # by name; trimmed alike
        assert (first.delivery, again.delivery) == ("sent", "replayed")
        assert (again.message_id, again.command_id) == (first.message_id, first.command_id)
        state = c.send_state(t.thread_id, first.command_id)
        assert state is not None and state.event is not None
        assert state.event.id == first.message_id
        assert c.send_state(t.thread_id, "cmd_unused") is None
        with pytest.raises(HubRefused) as conflict:
            c.thread_send(t.thread_id, "wake 2", key="wake-1")
        assert (conflict.value.code, conflict.value.retryable) == ("idempotency_conflict", False)
        c.archive_thread(t.thread_id)
        with pytest.raises(HubRefused) as archived:
            c.thread_send(t.thread_id, "wake 3", key="wake-3")
        assert (archived.value.code, archived.value.retryable) == ("thread_not_sendable", False)
        assert c.thread_send(t.thread_id, "wake 1", key="wake-1").message_id == first.message_id
        assert c.unarchive_thread(t.thread_id).archived is False
        # wake-3 was refused, so its key is unused: it sends now.
        assert c.thread_send(t.thread_id, "wake 3", key="wake-3").delivery == "sent"
        with pytest.raises(HubRefused) as channel:
            c.thread_send(setup.room, "hello", key="wake-4")
        assert channel.value.code == "thread_not_found"
        with pytest.raises(HubRefused) as channel:
            c.archive_thread(setup.room)
        assert channel.value.code == "thread_not_found"
        assert c.room(setup.room).archived is False


def test_the_async_client_scopes_the_key_by_sender_and_acting_for(setup: Setup) -> None:
    async def go() -> None:
        async with (
            AsyncHubClient(setup.hub.url, setup.tokens["alice"]) as alice,
            AsyncHubClient(setup.hub.url, setup.tokens["carol"]) as carol,
        ):
            t = await alice.ensure_thread(setup.workspace, "shared-thread")
            await carol.ensure_thread(setup.workspace, "shared-thread", owner="alice")
            a = await alice.thread_send(t.thread_id, "wake", key="w", acting_for="")
            c = await carol.thread_send(t.thread_id, "wake", key="w", acting_for="")
            ab = await alice.thread_send(t.thread_id, "wake", key="w", acting_for="bot")
            assert len({a.command_id, c.command_id, ab.command_id}) == 3
            assert len({a.message_id, c.message_id, ab.message_id}) == 3
            assert {a.delivery, c.delivery, ab.delivery} == {"sent"}
            events = await alice.events(t.thread_id)
            assert [e.sender for e in events] == ["alice", "carol", "alice"]

    asyncio.run(go())


def test_send_state_of_a_rejected_key_says_rejected(setup: Setup) -> None:
    tid = ensure(setup, "alice", "alice-home").json()["thread_id"]
    with setup.hub.client(setup.tokens["alice"]) as alice:
        assert alice.patch(f"/v1/rooms/{tid}", json={"sensitive_filter": True}).status_code == 200
        r = alice.post(
            f"/v1/rooms/{tid}/messages",
            json={"text": "AKIA" + "ABCDEFGHIJKLMNOP"},
            headers={"Idempotency-Key": "leak"},
        )
        assert (r.status_code, error_code(r)) == (422, "command_rejected")
        send = alice.get(f"/v1/rooms/{tid}/sends", params={"key": "leak"}).json()["send"]
        assert (send["state"], send["status"], send["event"]) == ("rejected", 422, None)
        assert send["response"] == r.json()
