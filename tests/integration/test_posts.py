"""Posting and the idempotency rules of docs/api.md, against a real hub process.

One hub per engine serves this module's tests, each in a workspace of its own; the tests
that restart a hub or set its flags start their own (`make_hub`)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import pytest

from hubproc import HubProcess, Setup, fresh_workspace, make_setup, poll


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def post(c: httpx.Client, room: str, body: dict, key: str | None = None) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return c.post(f"/v1/rooms/{room}/messages", json=body, headers=headers)


def events(c: httpx.Client, room: str) -> list[dict]:
    return c.get(f"/v1/rooms/{room}/events", params={"limit": 1000}).json()["events"]


def test_first_keyed_post_is_created_and_retry_replays_byte_for_byte(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        first = post(c, setup.room, {"text": "hi"}, "k1")
        again = post(c, setup.room, {"text": "hi"}, "k1")
    assert (first.status_code, first.headers["idempotency-status"]) == (201, "created")
    assert (again.status_code, again.headers["idempotency-status"]) == (201, "replayed")
    assert again.content == first.content


def test_replay_posts_nothing_and_wakes_no_one_again(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        for _ in range(3):
            assert post(c, setup.room, {"text": "ping @bot"}, "wake").status_code == 201
        assert [e["text"] for e in events(c, setup.room)] == ["ping @bot"]
    with setup.hub.client(setup.tokens["bot"]) as bot:
        assert len(bot.get("/v1/inbox").json()["items"]) == 1


def test_text_is_trimmed_before_the_fingerprint(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        a = post(c, setup.room, {"text": "  hello\n"}, "trim")
        b = post(c, setup.room, {"text": "hello"}, "trim")
    assert a.json()["event"]["text"] == "hello"
    assert b.headers["idempotency-status"] == "replayed"


def test_same_key_other_body_is_conflict_and_posts_nothing(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        assert post(c, setup.room, {"text": "one"}, "k").status_code == 201
        r = post(c, setup.room, {"text": "two"}, "k")
        assert r.status_code == 422
        assert r.json()["error"]["code"] == "idempotency_conflict"
        assert [e["text"] for e in events(c, setup.room)] == ["one"]


def test_same_key_other_room_is_conflict(shared_hub: HubProcess) -> None:
    hub = shared_hub
    s = make_setup(hub, ["alice"], ["bot"], workspace=fresh_workspace())
    with hub.client(s.tokens["alice"]) as c:
        r = c.post(f"/v1/workspaces/{s.workspace}/rooms", json={"name": "other"})
        other = r.json()["room"]["id"]
        assert post(c, s.room, {"text": "x"}, "k").status_code == 201
        r = post(c, other, {"text": "x"}, "k")
    assert r.json()["error"]["code"] == "idempotency_conflict"


def test_same_key_other_member_is_new_request(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as a, setup.hub.client(setup.tokens["carol"]) as c:
        ra = post(a, setup.room, {"text": "same"}, "shared")
        rc = post(c, setup.room, {"text": "same"}, "shared")
        assert ra.headers["idempotency-status"] == rc.headers["idempotency-status"] == "created"
        assert ra.json()["event"]["id"] != rc.json()["event"]["id"]
        assert len(events(a, setup.room)) == 2


def test_concurrent_same_key_makes_one_event(setup: Setup) -> None:
    barrier = threading.Barrier(32)

    def send(_: int) -> httpx.Response:
        with setup.hub.client(setup.tokens["alice"]) as c:
            barrier.wait()
            return post(c, setup.room, {"text": "race"}, "race-key")

    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(send, range(32)))
    assert {r.status_code for r in answers} == {201}
    assert len({r.content for r in answers}) == 1
    assert sorted(r.headers["idempotency-status"] for r in answers).count("created") == 1
    with setup.hub.client(setup.tokens["alice"]) as c:
        assert len(events(c, setup.room)) == 1


def test_bad_keys_are_refused_and_store_nothing(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        for bad in ["", "x" * 256, "has space", "tab\tkey", "é"]:
            r = c.post(
                f"/v1/rooms/{setup.room}/messages",
                json={"text": "x"},
                headers={"Idempotency-Key": bad.encode("utf-8")},
            )
            assert r.status_code == 400, bad
            assert r.json()["error"]["code"] == "invalid_idempotency_key"
        assert post(c, setup.room, {"text": "x"}, "x" * 255).status_code == 201
        assert len(events(c, setup.room)) == 1


def test_refusals_do_not_consume_the_key(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        assert (
            post(c, setup.room, {"text": "   "}, "k").json()["error"]["code"] == "invalid_request"
        )
        assert post(c, "rm_nope", {"text": "x"}, "k").json()["error"]["code"] == "room_not_found"
        assert (
            c.post(
                f"/v1/rooms/{setup.room}/messages", content=b"{", headers={"Idempotency-Key": "k"}
            ).json()["error"]["code"]
            == "invalid_json"
        )
        c.post(f"/v1/rooms/{setup.room}/archive")
        assert post(c, setup.room, {"text": "x"}, "k").json()["error"]["code"] == "room_archived"
        c.post(f"/v1/rooms/{setup.room}/unarchive")
        r = post(c, setup.room, {"text": "finally"}, "k")
        assert (r.status_code, r.headers["idempotency-status"]) == (201, "created")


def test_archived_room_still_replays_a_delivered_key(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        first = post(c, setup.room, {"text": "before"}, "k")
        c.post(f"/v1/rooms/{setup.room}/archive")
        again = post(c, setup.room, {"text": "before"}, "k")
        assert again.status_code == 201 and again.content == first.content
        assert post(c, setup.room, {"text": "new"}, "k2").status_code == 409


def test_bad_input_gets_a_stable_code_and_stores_nothing(setup: Setup) -> None:
    cases = [
        (b"{", "invalid_json"),
        (b"[]", "invalid_request"),
        (b'{"text": 5}', "invalid_request"),
        (b'{"text": "x", "unknown": 1}', "invalid_request"),
        (b'{"text": "x", "reply_kind": "done", "in_reply_to": "ev_1"}', "invalid_request"),
        (b'{"text": "x", "attachments": ["md_missing"]}', "invalid_request"),
        (b'{"text": ""}', "invalid_request"),
    ]
    with setup.hub.client(setup.tokens["alice"]) as c:
        for raw, code in cases:
            r = c.post(f"/v1/rooms/{setup.room}/messages", content=raw)
            assert r.status_code == 400, raw
            assert r.json()["error"]["code"] == code, raw
        big = c.post(
            f"/v1/rooms/{setup.room}/messages",
            content=b'{"text": "' + b"x" * (2 * 1024 * 1024) + b'"}',
        )
        assert (big.status_code, big.json()["error"]["code"]) == (413, "payload_too_large")
        assert events(c, setup.room) == []


def test_bad_or_missing_token_is_unauthorized(setup: Setup) -> None:
    with setup.hub.client("nope") as c:
        r = post(c, setup.room, {"text": "x"})
        assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")
    with setup.hub.client() as c:
        assert post(c, setup.room, {"text": "x"}).status_code == 401


def test_non_participant_is_refused(shared_hub: HubProcess) -> None:
    hub = shared_hub
    s = make_setup(hub, ["alice", "dave"], [], workspace=fresh_workspace())
    with hub.client(s.tokens["alice"]) as c:
        c.delete(f"/v1/rooms/{s.room}/participants/dave")
    with hub.client(s.tokens["dave"]) as d:
        r = post(d, s.room, {"text": "x"}, "k")
        assert (r.status_code, r.json()["error"]["code"]) == (403, "channel_membership_required")


def test_seq_is_gap_free_under_concurrent_posts(setup: Setup) -> None:
    def send(i: int) -> int:
        with setup.hub.client(setup.tokens["alice"]) as c:
            return post(c, setup.room, {"text": f"m{i}"}, f"k{i}").status_code

    with ThreadPoolExecutor(16) as pool:
        assert set(pool.map(send, range(200))) == {201}
    with setup.hub.client(setup.tokens["alice"]) as c:
        seqs = [e["seq"] for e in events(c, setup.room)]
    assert seqs == list(range(1, 201))


@contextmanager
def writes_blocked(setup: Setup) -> Iterator[None]:
    """Hold the lock the hub's next post needs: the SQLite write lock, or on PostgreSQL
    the room's row (its `seq`), from another connection."""
    if setup.hub.db_url is None:
        db = sqlite3.connect(setup.hub.data_dir / "hub.sqlite3", isolation_level=None, timeout=30)
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            db.execute("ROLLBACK")
            db.close()
        return
    import psycopg

    with psycopg.connect(setup.hub.db_url) as pg:
        pg.execute("SELECT 1 FROM rooms WHERE id = %s FOR UPDATE", (setup.room,))
        try:
            yield
        finally:
            pg.rollback()


@contextmanager
def key_records_locked(setup: Setup) -> Iterator[None]:
    """Nobody else may touch the key records: the SQLite write lock (reads in WAL still
    go), or on PostgreSQL an ACCESS EXCLUSIVE lock on the table (reads wait too)."""
    if setup.hub.db_url is None:
        with writes_blocked(setup):
            yield
        return
    import psycopg

    with psycopg.connect(setup.hub.db_url) as pg:
        pg.execute("LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            pg.rollback()


def test_a_replay_of_a_key_this_hub_committed_needs_no_database(setup: Setup) -> None:
    """An answer never changes while its key lives: the hub that committed it replays it
    from memory, even while the key records are locked (issue 14)."""
    with setup.hub.client(setup.tokens["alice"], timeout=5) as c:
        first = post(c, setup.room, {"text": "kept"}, "mem")
        assert first.status_code == 201
        with key_records_locked(setup):
            again = post(c, setup.room, {"text": "kept"}, "mem")
            other = post(c, setup.room, {"text": "changed"}, "mem")
        assert (again.headers["idempotency-status"], again.content) == ("replayed", first.content)
        assert (other.status_code, other.json()["error"]["code"]) == (422, "idempotency_conflict")
        assert [e["text"] for e in events(c, setup.room)] == ["kept"]


def test_a_key_committed_before_a_restart_replays_from_its_record(make_hub) -> None:  # noqa: ANN001
    """Memory starts empty: the claim in the write transaction finds the record."""
    hub = make_hub()
    s = make_setup(hub, ["alice"], [])
    with hub.client(s.tokens["alice"]) as c:
        first = post(c, s.room, {"text": "before"}, "r1")
    hub.stop()
    hub.start()
    with hub.client(s.tokens["alice"]) as c:
        again = post(c, s.room, {"text": "before"}, "r1")
        other = post(c, s.room, {"text": "after"}, "r1")
        assert (again.headers["idempotency-status"], again.content) == ("replayed", first.content)
        assert (other.status_code, other.json()["error"]["code"]) == (422, "idempotency_conflict")
        assert [e["text"] for e in events(c, s.room)] == ["before"]


def test_in_flight_key_waits_then_answers_running(setup: Setup) -> None:
    """While the first request holds its key (its write is blocked by another connection
    here), a second one waits the bounded time and gets 409 `running`."""
    with writes_blocked(setup):
        results: dict[str, httpx.Response] = {}

        def first() -> None:
            with setup.hub.client(setup.tokens["alice"], timeout=30) as c:
                results["first"] = post(c, setup.room, {"text": "slow"}, "held")

        t = threading.Thread(target=first)
        t.start()
        with setup.hub.client(setup.tokens["alice"], timeout=30) as c:
            # Give the first request time to claim its in-flight slot before the second asks.
            poll(lambda: _in_flight(setup), timeout=10)
            second = post(c, setup.room, {"text": "slow"}, "held")
        assert second.status_code == 409
        assert second.json()["error"] == {
            "code": "idempotency_in_flight",
            "state": "running",
            "message": second.json()["error"]["message"],
        }
        assert second.headers["retry-after"]
    t.join(30)
    assert results["first"].headers["idempotency-status"] == "created"
    with setup.hub.client(setup.tokens["alice"]) as c:
        assert (
            post(c, setup.room, {"text": "slow"}, "held").headers["idempotency-status"]
            == "replayed"
        )


def _in_flight(setup: Setup) -> bool:
    with setup.hub.client() as c:
        return _gauge(c.get("/metrics").text, "agentpost_idempotency_keys_in_flight") >= 1


def _gauge(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_expired_key_is_new_again_and_is_swept(make_hub) -> None:  # noqa: ANN001
    hub = make_hub(env={"AGENTPOST_SWEEP_INTERVAL": "0.2"}, extra_args=["--key-ttl-seconds", "1"])
    s = make_setup(hub, ["alice"], [])
    with hub.client(s.tokens["alice"]) as c:
        assert post(c, s.room, {"text": "x"}, "k").headers["idempotency-status"] == "created"
        poll(lambda: _swept(hub) >= 1, timeout=10)
        again = post(c, s.room, {"text": "x"}, "k")
        assert again.headers["idempotency-status"] == "created"
        assert len(events(c, s.room)) == 2


def _swept(hub: HubProcess) -> float:
    with hub.client() as c:
        return _gauge(c.get("/metrics").text, "agentpost_idempotency_keys_swept_total")


def test_metadata_beyond_json_safe_integers_is_refused(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        for key in (None, "big"):
            r = post(c, setup.room, {"text": "x", "metadata": {"n": 2**60}}, key)
            assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request")
        assert events(c, setup.room) == []


def test_client_hanging_up_mid_body_posts_nothing_and_is_no_internal_error(make_hub) -> None:  # noqa: ANN001
    import socket
    from urllib.parse import urlsplit

    hub = make_hub(extra_args=["--log-level", "info"])
    s = make_setup(hub, ["alice"], [])
    url = urlsplit(hub.url)
    head = (
        f"POST /v1/rooms/{s.room}/messages HTTP/1.1\r\nHost: {url.hostname}\r\n"
        f"Authorization: Bearer {s.tokens['alice']}\r\nIdempotency-Key: cut\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    ).encode() + b'{"text": "half'
    with socket.create_connection((url.hostname, url.port)) as sock:
        sock.sendall(head)
    assert hub.log_path is not None
    poll(lambda: "client left during POST" in hub.log_path.read_text())
    assert "internal error" not in hub.log_path.read_text()
    with hub.client(s.tokens["alice"]) as c:
        assert events(c, s.room) == []
        ok = post(c, s.room, {"text": "whole"}, "cut")
        assert ok.headers["idempotency-status"] == "created"


def test_member_removed_while_its_body_is_in_flight_is_refused(setup: Setup) -> None:
    """Authenticated before the removal, committed after it: the write re-checks
    (docs/architecture.md#many-hub-processes)."""
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(setup.hub.url)
    body = b'{"text": "late @alice"}'
    head = (
        f"POST /v1/rooms/{setup.room}/messages HTTP/1.1\r\nHost: {url.hostname}\r\n"
        f"Authorization: Bearer {setup.tokens['bot']}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection((url.hostname, url.port)) as sock:
        sock.sendall(head + body[:5])
        poll(lambda: _in_progress_requests(setup) >= 2)  # the slow post and this /metrics
        with setup.hub.client(setup.hub.admin_token) as admin:
            r = admin.delete(f"/v1/admin/workspaces/{setup.workspace}/members/bot")
            assert r.status_code == 200
        sock.sendall(body[5:])
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]
    assert b'"agent_removed"' in answer
    with setup.hub.client(setup.tokens["alice"]) as c:
        assert events(c, setup.room) == []


def _in_progress_requests(setup: Setup) -> float:
    """Requests the hub is handling now (the auth of the slow post is done by then)."""
    with setup.hub.client() as c:
        return _gauge(c.get("/metrics").text, "agentpost_requests_in_progress")


def metric(c: httpx.Client, name: str) -> float:
    for line in c.get("/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def test_a_batch_of_plain_posts_is_written_as_data_with_the_same_answers(
    shared_hub: HubProcess,
) -> None:
    """Plain keyed posts queued behind one lock reach the writer as one batch: written as
    data together (issue 14), while a refusal and a key with a record in the same batch get
    the answers they always had; seqs and inbox cursors stay gap-free."""
    hub = shared_hub
    s = make_setup(hub, ["alice", "carol"], ["bot"], workspace=fresh_workspace())
    with hub.client(hub.admin_token) as admin:
        r = admin.post(
            f"/v1/admin/workspaces/{s.workspace}/members", json={"name": "erin", "kind": "human"}
        )
        erin = r.json()["token"]
    with hub.client(s.tokens["alice"], timeout=30) as c:
        assert post(c, s.room, {"text": "first"}, "dup").status_code == 201
        before = metric(c, "agentpost_write_jobs_as_data")
        tokens = [s.tokens["alice"]] * 20 + [s.tokens["bot"], erin, s.tokens["carol"]]
        keys = [f"p{i}" for i in range(20)] + ["b1", "e1", "c1"]

        def send(i: int) -> httpx.Response:
            with hub.client(tokens[i], timeout=30) as one:
                return post(one, s.room, {"text": f"plain {i}"}, keys[i])

        with ThreadPoolExecutor(len(keys)) as pool:
            with writes_blocked(s):
                answers = [pool.submit(send, i) for i in range(len(keys))]
                poll(lambda: metric(c, "agentpost_idempotency_keys_in_flight") == len(keys))
            got = [a.result() for a in answers]
        assert metric(c, "agentpost_write_jobs_as_data") - before >= 2
        created = [r for r in got[:21]]
        assert all(
            (r.status_code, r.headers["idempotency-status"]) == (201, "created") for r in created
        ), [r.text for r in created]
        assert got[21].status_code == 403
        assert got[21].json()["error"]["code"] == "channel_membership_required"
        assert got[22].status_code == 201
        evs = {e["id"]: e for e in events(c, s.room)}
        assert sorted(e["seq"] for e in evs.values()) == list(range(1, 24))
        for i, r in enumerate(created):
            ev = r.json()["event"]
            assert evs[ev["id"]] == ev
            want = ("no_mention", []) if i == 20 else ("sole_agent", ["bot"])
            assert (ev["route"], ev["targets"]) == want
            sent = c.get(
                f"/v1/rooms/{s.room}/sends",
                params={"key": keys[i]},
                headers={"authorization": f"Bearer {tokens[i]}"},
            )
            assert sent.json()["send"]["response"] == r.json()
        # Written as data, indexed for search like any event (docs/search.md).
        hits = c.get("/v1/search", params={"q": "plain", "limit": 100}).json()["hits"]
        assert len(hits) == 22
    with hub.client(erin) as e:
        unused = e.get(f"/v1/rooms/{s.room}/sends", params={"key": "e1"})
        assert unused.json()["error"]["code"] == "send_not_found"
    with hub.client(s.tokens["bot"]) as bot:
        items = bot.get("/v1/inbox", params={"limit": 100}).json()["items"]
    # "first", alice's 20 and carol's: all routed to the sole agent, cursors gap-free.
    assert [i["cursor"] for i in items] == list(range(1, 23))
