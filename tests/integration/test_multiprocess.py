"""Many hub processes, one PostgreSQL database: one key, one event, whichever process a
retry lands on; streams see every process's events (docs/deploy.md)."""

from __future__ import annotations

import json
import random
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from hubproc import HubProcess, make_setup, poll

Pair = tuple[HubProcess, HubProcess]


@pytest.fixture
def pair(engine: str | None, make_hub: Callable[..., HubProcess]) -> Pair:
    if engine is None:
        pytest.skip("several hub processes share a database on PostgreSQL only")
    token = {"AGENTPOST_ADMIN_TOKEN": "admin-of-both"}
    return make_hub("a", env=token), make_hub("b", env=token)


def post(hub: HubProcess, token: str, room: str, text: str, key: str | None) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key else {}
    with hub.client(token) as c:
        return c.post(f"/v1/rooms/{room}/messages", json={"text": text}, headers=headers)


def all_events(hub: HubProcess, token: str, room: str) -> list[dict]:
    out: list[dict] = []
    with hub.client(token) as c:
        while True:
            page = c.get(
                f"/v1/rooms/{room}/events",
                params={"after": out[-1]["seq"] if out else 0, "limit": 1000},
            ).json()["events"]
            if not page:
                return out
            out += page


def test_one_key_split_across_two_processes_makes_one_event(pair: Pair) -> None:
    a, b = pair
    s = make_setup(a, ["alice"], ["bot"])
    barrier = threading.Barrier(32)

    def send(i: int) -> httpx.Response:
        barrier.wait()
        return post(a if i % 2 else b, s.tokens["alice"], s.room, "once @bot", "one-key")

    with ThreadPoolExecutor(32) as pool:
        answers = list(pool.map(send, range(32)))
    assert {r.status_code for r in answers} == {201}
    assert len({r.content for r in answers}) == 1
    assert [r.headers["idempotency-status"] for r in answers].count("created") == 1
    assert len(all_events(b, s.tokens["alice"], s.room)) == 1
    with a.client(s.tokens["bot"]) as bot:
        assert len(bot.get("/v1/inbox").json()["items"]) == 1


def test_seq_stays_gap_free_with_two_writers(pair: Pair) -> None:
    a, b = pair
    s = make_setup(a, ["alice", "carol"], ["bot"])

    def send(i: int) -> int:
        who = "alice" if i % 3 else "carol"
        return post(a if i % 2 else b, s.tokens[who], s.room, f"m{i} @bot", f"k{i}").status_code

    with ThreadPoolExecutor(16) as pool:
        assert set(pool.map(send, range(300))) == {201}
    evs = all_events(a, s.tokens["alice"], s.room)
    assert [e["seq"] for e in evs] == list(range(1, 301))
    assert sorted(e["text"] for e in evs) == sorted(f"m{i} @bot" for i in range(300))
    with b.client(s.tokens["bot"]) as bot:
        items = bot.get("/v1/inbox", params={"limit": 1000}).json()["items"]
    assert [i["cursor"] for i in items] == list(range(1, 301))


def test_post_on_one_process_reaches_the_others_stream_within_a_second(pair: Pair) -> None:
    a, b = pair
    s = make_setup(a, ["alice"], ["bot"])
    got: dict[str, dict] = {}

    def listen() -> None:
        with (
            b.client(s.tokens["alice"]) as c,
            c.stream("GET", f"/v1/rooms/{s.room}/stream", timeout=10) as resp,
        ):
            for line in resp.iter_lines():
                if line.startswith("data:"):
                    got["event"] = json.loads(line[5:])
                    return

    t = threading.Thread(target=listen)
    t.start()
    poll(lambda: _open_streams(b, "room") >= 1)
    import time

    sent_at = time.monotonic()
    ev = post(a, s.tokens["alice"], s.room, "across", None).json()["event"]
    t.join(5)
    assert got["event"]["id"] == ev["id"]
    assert time.monotonic() - sent_at < 1.0


def test_inbox_long_poll_on_one_process_is_woken_by_the_other(pair: Pair) -> None:
    a, b = pair
    s = make_setup(a, ["alice"], ["bot"])
    got: dict[str, dict] = {}

    def wait() -> None:
        with b.client(s.tokens["bot"], timeout=30) as c:
            got["page"] = c.get("/v1/inbox", params={"wait": 20}).json()

    t = threading.Thread(target=wait)
    t.start()
    poll(lambda: _open_streams(b, "inbox_poll") >= 1)
    ev = post(a, s.tokens["alice"], s.room, "@bot over here", None).json()["event"]
    t.join(10)
    assert [i["event"]["id"] for i in got["page"]["items"]] == [ev["id"]]


def _open_streams(hub: HubProcess, kind: str) -> float:
    with hub.client() as c:
        for line in c.get("/metrics").text.splitlines():
            if line.startswith(f'agentpost_open_streams{{kind="{kind}"}}'):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def _burst_until_all_stored(
    hubs: list[HubProcess],
    token: str,
    room: str,
    keys: list[str],
    disrupt: Callable[[], None],
    after: int,
) -> dict[str, str]:
    """Post every key (spread over `hubs`) from 8 threads; call `disrupt` once `after`
    posts were acknowledged; then retry every key until it is stored. Returns key → event id
    of the first 2xx each key got."""
    acked: dict[str, str] = {}
    lock = threading.Lock()
    fired = threading.Event()

    def send(i: int) -> None:
        hub = hubs[i % len(hubs)]
        try:
            r = post(hub, token, room, f"text-{keys[i]}", keys[i])
        except httpx.TransportError:
            return
        if r.status_code == 201:
            with lock:
                acked.setdefault(keys[i], r.json()["event"]["id"])
                if len(acked) >= after and not fired.is_set():
                    fired.set()
                    disrupt()
        else:
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "storage_unavailable"

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(send, range(len(keys))))
    return acked


def _retry_all(
    hub: HubProcess, token: str, room: str, keys: list[str], acked: dict[str, str]
) -> None:
    for key in keys:

        def stored(key: str = key) -> bool:
            try:
                r = post(hub, token, room, f"text-{key}", key)
            except httpx.TransportError:
                return False
            if r.status_code != 201:
                assert r.status_code == 503, r.text
                return False
            if key in acked:
                assert r.json()["event"]["id"] == acked[key]
                assert r.headers["idempotency-status"] == "replayed"
            return True

        poll(stored, timeout=30, interval=0.2)


def _exactly_once(hub: HubProcess, token: str, room: str, keys: list[str]) -> None:
    evs = all_events(hub, token, room)
    texts = [e["text"] for e in evs]
    assert sorted(texts) == sorted(f"text-{k}" for k in keys)
    assert [e["seq"] for e in evs] == list(range(1, len(evs) + 1))


def test_kill_one_of_two_processes_under_load_survivor_replays_or_creates(pair: Pair) -> None:
    a, b = pair
    s = make_setup(a, ["alice"], [])
    keys = [f"k{i}" for i in range(240)]
    acked = _burst_until_all_stored(
        [a, b], s.tokens["alice"], s.room, keys, disrupt=a.kill, after=random.randrange(20, 100)
    )
    assert a.proc is not None and a.proc.poll() is not None  # really killed
    _retry_all(b, s.tokens["alice"], s.room, keys, acked)
    _exactly_once(b, s.tokens["alice"], s.room, keys)


def _terminate_hub_connections(hub: HubProcess) -> None:
    import psycopg

    assert hub.db_url is not None
    with psycopg.connect(hub.db_url, autocommit=True) as pg:
        pg.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


@pytest.mark.drops_postgres_connections  # every backend of the database, other tests' too
def test_dropped_database_connections_mid_burst_store_each_key_once(pair: Pair) -> None:
    a, b = pair
    s = make_setup(a, ["alice"], [])
    keys = [f"k{i}" for i in range(240)]
    acked = _burst_until_all_stored(
        [a, b],
        s.tokens["alice"],
        s.room,
        keys,
        disrupt=lambda: _terminate_hub_connections(a),
        after=random.randrange(20, 100),
    )
    _retry_all(a, s.tokens["alice"], s.room, keys, acked)
    _exactly_once(b, s.tokens["alice"], s.room, keys)


def test_postgres_restart_mid_burst_stores_each_key_once(
    pair: Pair, restart_postgres: list[str]
) -> None:
    a, b = pair
    s = make_setup(a, ["alice"], [])
    keys = [f"k{i}" for i in range(160)]

    def restart() -> None:
        threading.Thread(
            target=subprocess.run,
            args=(restart_postgres,),
            kwargs={"check": True, "capture_output": True},
        ).start()

    acked = _burst_until_all_stored(
        [a, b], s.tokens["alice"], s.room, keys, disrupt=restart, after=random.randrange(20, 60)
    )
    _retry_all(b, s.tokens["alice"], s.room, keys, acked)
    _exactly_once(a, s.tokens["alice"], s.room, keys)
