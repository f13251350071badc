"""File reservations over HTTP on both engines (docs/reservations.md): grants and conflicts
that name the holder, shared and exclusive, a retried reserve replays, renew, release and
force-release (by ids, never names), expiry by the sweeper and release on the holder's
removal, each said in the announcing room; racing requests through two hub processes get
one exclusive grant."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx

from hubproc import HubProcess, Setup, make_setup, poll

PROJECT = "github.com/acme/app"


def _reserve(
    c: httpx.Client, ws: str, paths: list[str], key: str | None = None, **more: object
) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key is not None else {}
    body = {"project": PROJECT, "paths": paths, **more}
    return c.post(f"/v1/workspaces/{ws}/reservations", json=body, headers=headers)


def _notices(hub: HubProcess, token: str, room: str) -> list[str]:
    with hub.client(token) as c:
        events = c.get(f"/v1/rooms/{room}/events", params={"after": 0}).json()["events"]
    return [e["text"] for e in events if e["type"] == "notice"]


def test_an_exclusive_grant_refuses_an_overlapping_one_naming_the_holder(
    shared_setup: Setup,
) -> None:
    s = shared_setup
    with s.hub.client(s.tokens["bot"]) as bot, s.hub.client(s.tokens["helper"]) as helper:
        r = _reserve(bot, s.workspace, ["src/auth/**"], reason="refactor auth", room=s.room)
        assert r.status_code == 201, r.text
        got = r.json()["reservation"]
        assert got["holder"] == "bot" and got["exclusive"] is True and got["state"] == "held"
        assert got["paths"] == ["src/auth/**"] and got["fence"] == 1
        r = _reserve(helper, s.workspace, ["src/auth/login.py", "docs/*.md"])
        assert r.status_code == 409, r.text
        err = r.json()["error"]
        assert err["code"] == "reservation_conflict"
        assert "bot" in err["message"] and "refactor auth" in err["message"]
        [c] = err["conflicts"]
        assert c["holder"] == "bot" and c["paths"] == ["src/auth/**"]
        assert c["requested"] == ["src/auth/login.py"] and c["reason"] == "refactor auth"
        assert c["exclusive"] is True and c["expires_at"] == got["expires_at"]
        # A path that no pattern of bot's covers is granted, with the project's next fence.
        r = _reserve(helper, s.workspace, ["docs/*.md"])
        assert r.status_code == 201 and r.json()["reservation"]["fence"] == 2
        # The holder itself may hold overlapping patterns.
        assert _reserve(bot, s.workspace, ["src/**"]).status_code == 201
    assert any("bot reserved src/auth/**" in t for t in _notices(s.hub, s.tokens["alice"], s.room))


def test_shared_reservations_share_and_an_exclusive_one_waits(shared_setup: Setup) -> None:
    s = shared_setup
    with s.hub.client(s.tokens["bot"]) as bot, s.hub.client(s.tokens["helper"]) as helper:
        assert _reserve(bot, s.workspace, ["api/*.proto"], exclusive=False).status_code == 201
        assert _reserve(helper, s.workspace, ["api/**"], exclusive=False).status_code == 201
        r = _reserve(helper, s.workspace, ["api/v1.proto"])
        assert r.status_code == 409
        assert [c["holder"] for c in r.json()["error"]["conflicts"]] == ["bot"]


def test_a_retried_reserve_replays_and_grants_once(shared_setup: Setup) -> None:
    s = shared_setup
    with s.hub.client(s.tokens["bot"]) as bot:
        first = _reserve(bot, s.workspace, ["lib/**"], key="k-lib-1")
        again = _reserve(bot, s.workspace, ["lib/**"], key="k-lib-1")
        assert first.status_code == again.status_code == 201
        assert first.headers["Idempotency-Status"] == "created"
        assert again.headers["Idempotency-Status"] == "replayed"
        assert first.content == again.content
        listed = bot.get(f"/v1/workspaces/{s.workspace}/reservations", params={"project": PROJECT})
        assert [r["paths"] for r in listed.json()["reservations"]] == [["lib/**"]]
        other = _reserve(bot, s.workspace, ["lib/x"], key="k-lib-1")
        assert other.status_code == 422
        assert other.json()["error"]["code"] == "idempotency_conflict"


def test_renew_release_and_force_release_compare_member_ids(shared_setup: Setup) -> None:
    s = shared_setup
    with (
        s.hub.client(s.tokens["bot"]) as bot,
        s.hub.client(s.tokens["carol"]) as carol,
        s.hub.client(s.tokens["alice"]) as alice,
        s.hub.client(s.hub.admin_token) as admin,
    ):
        rid = _reserve(bot, s.workspace, ["a/**"], room=s.room).json()["reservation"]["id"]
        r = bot.post(f"/v1/reservations/{rid}/renew", json={"ttl_seconds": 7200})
        assert r.status_code == 200 and r.json()["reservation"]["state"] == "held"
        assert carol.post(f"/v1/reservations/{rid}/renew", json={}).status_code == 403
        # carol owns no agent: she may not end bot's reservation.
        r = carol.delete(f"/v1/reservations/{rid}")
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
        # alice is bot's owner (by id): she may.
        r = alice.delete(f"/v1/reservations/{rid}")
        assert r.status_code == 200 and r.json()["reservation"]["state"] == "forced"
        r = bot.post(f"/v1/reservations/{rid}/renew", json={"ttl_seconds": 60})
        assert r.status_code == 409 and r.json()["error"]["code"] == "reservation_ended"
        rid = _reserve(bot, s.workspace, ["b/**"], room=s.room).json()["reservation"]["id"]
        r = bot.delete(f"/v1/reservations/{rid}", headers={"Idempotency-Key": "rel-b"})
        assert r.status_code == 200 and r.json()["reservation"]["state"] == "released"
        again = bot.delete(f"/v1/reservations/{rid}", headers={"Idempotency-Key": "rel-b"})
        assert again.headers["Idempotency-Status"] == "replayed"
        rid = _reserve(bot, s.workspace, ["c/**"]).json()["reservation"]["id"]
        r = admin.delete(f"/v1/reservations/{rid}")
        assert r.status_code == 200 and r.json()["reservation"]["state"] == "forced"
        assert bot.delete("/v1/reservations/rsv_nothing").status_code == 404
    texts = _notices(s.hub, s.tokens["alice"], s.room)
    assert any("alice force-released bot's a/**" in t for t in texts)
    assert any("bot released b/**" in t for t in texts)


def test_check_names_exclusive_holders_of_concrete_paths(shared_setup: Setup) -> None:
    s = shared_setup
    with s.hub.client(s.tokens["bot"]) as bot, s.hub.client(s.tokens["helper"]) as helper:
        assert _reserve(bot, s.workspace, ["*.lock", "web/"], reason="deps").status_code == 201
        assert _reserve(bot, s.workspace, ["notes/**"], exclusive=False).status_code == 201
        url = f"/v1/workspaces/{s.workspace}/reservations/check"
        body = {"project": PROJECT, "paths": ["a/poetry.lock", "web/x/y.js", "notes/n.md", "z"]}
        [c] = helper.post(url, json=body).json()["conflicts"]
        assert c["holder"] == "bot" and c["requested"] == ["a/poetry.lock", "web/x/y.js"]
        assert c["paths"] == ["*.lock", "web"] and c["reason"] == "deps"
        assert bot.post(url, json=body).json()["conflicts"] == []  # its own are no conflict
        bad = helper.post(url, json={"project": PROJECT, "paths": ["a\x01b"]})
        assert bad.status_code == 400


def test_a_reservation_expires_and_the_room_is_told(make_hub: Callable[..., HubProcess]) -> None:
    hub = make_hub(env={"AGENTPOST_SWEEP_INTERVAL": "0.2"})
    s = make_setup(hub, ["alice"], ["bot", "helper"])
    with hub.client(s.tokens["bot"]) as bot, hub.client(s.tokens["helper"]) as helper:
        assert _reserve(bot, s.workspace, ["x/**"], ttl_seconds=1, room=s.room).status_code == 201
        # Lapsed is over at once, swept or not: another member is granted.
        poll(lambda: _reserve(helper, s.workspace, ["x/y"]).status_code == 201, timeout=10)
    poll(lambda: any("expired" in t for t in _notices(hub, s.tokens["alice"], s.room)))


def test_an_agents_reservations_end_when_its_workers_lease_is_lost_for_good(
    make_hub: Callable[..., HubProcess],
) -> None:
    """bot ran a Worker (its lease) when it reserved; the Worker stops (lease released) and
    none takes the lease again within the grace: the sweep ends bot's reservation
    (`worker_gone`) and says so in the room. helper, never served by a Worker, keeps its
    own; a Worker that comes back within the grace keeps bot's next one."""
    hub = make_hub(
        env={"AGENTPOST_SWEEP_INTERVAL": "0.2", "AGENTPOST_RESERVATION_WORKER_GRACE": "1"}
    )
    s = make_setup(hub, ["alice"], ["bot", "helper"])
    lease = {"worker_id": "b" * 32, "host": "laptop", "pid": 4242}
    with hub.client(s.tokens["bot"]) as bot, hub.client(s.tokens["helper"]) as helper:
        fence = bot.post("/v1/worker/lease", json=lease).json()["lease"]["fence"]
        r = _reserve(bot, s.workspace, ["src/**"], room=s.room, ttl_seconds=3600)
        assert r.status_code == 201, r.text
        mine = r.json()["reservation"]["id"]
        assert _reserve(helper, s.workspace, ["docs/**"], ttl_seconds=3600).status_code == 201
        assert bot.post("/v1/worker/lease/release", json={"fence": fence}).status_code == 200

        def ended() -> bool:
            found = bot.get(f"/v1/workspaces/{s.workspace}/reservations").json()
            return mine not in [x["id"] for x in found["reservations"]]

        poll(ended, timeout=15)
        live = bot.get(f"/v1/workspaces/{s.workspace}/reservations").json()["reservations"]
        assert [x["holder"] for x in live] == ["helper"]
        assert _reserve(helper, s.workspace, ["src/a.py"]).status_code == 201
        # A Worker back within the grace: the lease is live again, the reservation stays.
        fence = bot.post("/v1/worker/lease", json=lease).json()["lease"]["fence"]
        again = _reserve(bot, s.workspace, ["lib/**"], ttl_seconds=3600)
        assert again.status_code == 201, again.text
        bot.post("/v1/worker/lease/release", json={"fence": fence})
        bot.post("/v1/worker/lease", json=lease)  # retaken at once: a restart
        # Then helper's Worker goes for good: once the sweep ends helper's reservation, the
        # grace of bot's earlier release has passed too, and bot's is still held.
        h_lease = {**lease, "worker_id": "c" * 32}
        h_fence = helper.post("/v1/worker/lease", json=h_lease).json()["lease"]["fence"]
        late = _reserve(helper, s.workspace, ["z/**"], room=s.room, ttl_seconds=3600)
        assert late.status_code == 201, late.text
        helper.post("/v1/worker/lease/release", json={"fence": h_fence})

        def live_ids() -> list[str]:
            found = bot.get(f"/v1/workspaces/{s.workspace}/reservations").json()
            return [x["id"] for x in found["reservations"]]

        poll(lambda: late.json()["reservation"]["id"] not in live_ids(), timeout=15)
        assert again.json()["reservation"]["id"] in live_ids()
    texts = _notices(hub, s.tokens["alice"], s.room)
    assert sum("bot's Worker stopped serving it" in t for t in texts) == 1
    assert sum("helper's Worker stopped serving it" in t for t in texts) == 1


def test_removing_the_holder_ends_its_reservations(shared_setup: Setup) -> None:
    s = shared_setup
    with s.hub.client(s.tokens["helper"]) as helper, s.hub.client(s.tokens["bot"]) as bot:
        assert _reserve(helper, s.workspace, ["y/**"], room=s.room).status_code == 201
        assert _reserve(bot, s.workspace, ["y/z"]).status_code == 409
        with s.hub.client(s.hub.admin_token) as admin:
            r = admin.delete(f"/v1/admin/workspaces/{s.workspace}/members/helper")
            assert r.status_code == 200, r.text
        assert _reserve(bot, s.workspace, ["y/z"]).status_code == 201
    texts = _notices(s.hub, s.tokens["alice"], s.room)
    assert any("helper was removed" in t for t in texts)


def test_racing_requests_through_two_hubs_get_one_exclusive_grant(
    make_hub: Callable[..., HubProcess], engine: str | None
) -> None:
    first = make_hub("one")
    hubs = [first, make_hub("two")] if engine is not None else [first]
    agents = [f"a{i}" for i in range(8)]
    s = make_setup(first, ["alice"], agents)
    results: list[int] = []
    barrier = threading.Barrier(len(agents))

    def race(i: int) -> None:
        hub = hubs[i % len(hubs)]
        with hub.client(s.tokens[agents[i]]) as c:
            barrier.wait()
            results.append(_reserve(c, s.workspace, ["shared/**", f"own{i}/**"]).status_code)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(agents))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [201] + [409] * (len(agents) - 1)
    with first.client(s.tokens["alice"]) as c:
        live = c.get(f"/v1/workspaces/{s.workspace}/reservations").json()["reservations"]
    assert len(live) == 1


def test_a_freed_name_does_not_inherit_the_right_to_force_release(shared_setup: Setup) -> None:
    """Ownership is compared by member id (docs/architecture.md#identity): a new `alice`,
    after the old one was removed hard, owns none of bot's reservations."""
    s = shared_setup
    with s.hub.client(s.tokens["bot"]) as bot, s.hub.client(s.hub.admin_token) as admin:
        rid = _reserve(bot, s.workspace, ["owned/**"]).json()["reservation"]["id"]
        members = f"/v1/admin/workspaces/{s.workspace}/members"
        assert admin.delete(f"{members}/alice", params={"hard": "true"}).status_code == 200
        r = admin.post(members, json={"name": "alice", "kind": "human"})
        assert r.status_code == 201, r.text
        new_alice = r.json()["token"]
    with s.hub.client(new_alice) as alice:
        r = alice.delete(f"/v1/reservations/{rid}")
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"


def test_a_hub_killed_after_the_grant_commits_replays_it_to_the_retry(
    make_hub: Callable[..., HubProcess],
) -> None:
    """kill -9 between the commit and the answer: the caller saw nothing, retries with its
    key on a restarted hub, and gets the one grant made, never a second."""
    hub = make_hub()
    s = make_setup(hub, ["alice"], ["bot"])
    hub.stop()
    crashing = make_hub(env={"AGENTPOST_CRASH_POINT": "after_commit"})
    with crashing.client(s.tokens["bot"]) as bot:
        try:
            _reserve(bot, s.workspace, ["k/**"], key="grant-k")
            raise AssertionError("the hub answered; it should have died after the commit")
        except httpx.TransportError:
            pass
    assert crashing.wait_exit() == 137
    restarted = make_hub()
    with restarted.client(s.tokens["bot"]) as bot:
        again = _reserve(bot, s.workspace, ["k/**"], key="grant-k")
        assert again.status_code == 201 and again.headers["Idempotency-Status"] == "replayed"
        live = bot.get(f"/v1/workspaces/{s.workspace}/reservations").json()["reservations"]
        assert [r["id"] for r in live] == [again.json()["reservation"]["id"]]
