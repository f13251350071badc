"""What a reader may cost the hub: pages bounded in bytes, a cap on open streams per member,
and a removed member's waiting long poll refused at once (docs/api.md "Streams")."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import httpx
import pytest

from hubproc import HubProcess, Setup, make_setup, poll

BIG = "y" * 900_000  # a 900 KB event: a stream page (512 KiB) holds one, an answer four


def post_big(c: httpx.Client, room: str, n: int, mention: str = "") -> list[dict]:
    out = []
    for i in range(n):
        r = c.post(
            f"/v1/rooms/{room}/messages",
            json={"text": f"{mention}big {i}", "metadata": {"blob": BIG}},
        )
        assert r.status_code == 201, r.text
        out.append(r.json()["event"])
    return out


def sse_data(resp: httpx.Response, want: int) -> list[dict]:
    got: list[dict] = []
    for line in resp.iter_lines():
        if line.startswith("data:"):
            got.append(json.loads(line[5:]))
            if len(got) == want:
                break
    return got


def test_large_events_page_by_size_and_every_one_arrives_in_order(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"], timeout=60) as c:
        posted = post_big(c, setup.room, 6, "@bot ")
        first = c.get(f"/v1/rooms/{setup.room}/events", params={"limit": 1000}).json()["events"]
        # 4 MiB of bodies per answer: a short page, and paging on finds the rest.
        assert [e["seq"] for e in first] == [1, 2, 3, 4]
        rest = c.get(f"/v1/rooms/{setup.room}/events", params={"after": 4}).json()["events"]
        assert [e["seq"] for e in rest] == [5, 6]
        assert c.get(f"/v1/rooms/{setup.room}/events", params={"after": 6}).json()["events"] == []
        with c.stream("GET", f"/v1/rooms/{setup.room}/stream") as resp:
            streamed = sse_data(resp, 6)
        assert [e["id"] for e in streamed] == [e["id"] for e in posted]
        assert all(e["metadata"]["blob"] == BIG for e in streamed)
    with setup.hub.client(setup.tokens["bot"], timeout=60) as bot:
        page = bot.get("/v1/inbox", params={"limit": 1000}).json()
        assert [i["event"]["seq"] for i in page["items"]] == [1, 2, 3, 4]
        assert page["cursor"] == page["items"][-1]["cursor"]
        with bot.stream("GET", "/v1/inbox/stream") as resp:
            items = sse_data(resp, 6)
        assert [i["event"]["id"] for i in items] == [e["id"] for e in posted]


def test_one_stream_too_many_for_a_member_is_429_and_a_closed_one_frees_its_slot(
    make_hub: Callable[..., HubProcess],
) -> None:
    hub = make_hub(env={"AGENTPOST_MAX_STREAMS": "2"})
    setup = make_setup(hub, ["alice", "carol"], ["bot"])
    room_path = f"/v1/rooms/{setup.room}/stream"
    with hub.client(setup.tokens["alice"], timeout=10) as a:
        with a.stream("GET", room_path) as s1, a.stream("GET", "/v1/inbox/stream") as s2:
            assert (s1.status_code, s2.status_code) == (200, 200)
            for path in (room_path, "/v1/inbox/stream"):
                with a.stream("GET", path) as r:
                    assert r.status_code == 429
                    r.read()
                assert r.json()["error"]["code"] == "too_many_streams"
                assert r.json()["error"]["limit"] == 2
                assert r.headers["Retry-After"]
            # Other members and ordinary requests are not affected.
            with hub.client(setup.tokens["carol"], timeout=10) as carol:
                with carol.stream("GET", room_path) as other:
                    assert other.status_code == 200
            assert a.get(f"/v1/rooms/{setup.room}/events").status_code == 200
        # Both closed: the hub notices the hang-up and gives the slots back.
        def reopened() -> bool:
            with a.stream("GET", room_path) as again:
                return again.status_code == 200

        poll(reopened, timeout=20, interval=0.1)


def test_a_waiting_long_poll_of_a_removed_member_is_refused_at_once(setup: Setup) -> None:
    answers: dict[str, httpx.Response] = {}
    took: dict[str, float] = {}

    def long_poll(name: str) -> None:
        with setup.hub.client(setup.tokens[name], timeout=60) as c:
            start = time.monotonic()
            answers[name] = c.get("/v1/inbox", params={"wait": 30})
            took[name] = time.monotonic() - start

    waiters = [threading.Thread(target=long_poll, args=(n,)) for n in ("bot", "carol")]
    for t in waiters:
        t.start()
    poll(lambda: _inbox_polls(setup.hub) >= 2)
    with setup.hub.client(setup.hub.admin_token) as admin:
        assert admin.delete("/v1/admin/workspaces/acme/members/bot").status_code == 200
        r = admin.delete("/v1/admin/workspaces/acme/members/carol", params={"hard": "true"})
        assert r.status_code == 200
    for t in waiters:
        t.join(60)
    assert (answers["bot"].status_code, answers["bot"].json()["error"]["code"]) == (
        403,
        "agent_removed",
    )
    assert (answers["carol"].status_code, answers["carol"].json()["error"]["code"]) == (
        403,
        "member_removed",
    )
    assert max(took.values()) < 20  # woken by the removal, not by the end of the wait


def test_a_removal_through_another_hub_process_refuses_the_waiting_poll(
    engine: str | None, make_hub: Callable[..., HubProcess]
) -> None:
    """PostgreSQL: the poll waits on process a, the admin removes through process b; the
    wake-up crosses by LISTEN/NOTIFY and the poll answers 403, not an empty 200."""
    if engine is None:
        pytest.skip("several hub processes share a database on PostgreSQL only")
    token = {"AGENTPOST_ADMIN_TOKEN": "admin-of-both"}
    a, b = make_hub("a", env=token), make_hub("b", env=token)
    setup = make_setup(a, ["alice"], ["bot"])
    answer: dict[str, httpx.Response] = {}
    took: list[float] = []

    def long_poll() -> None:
        with a.client(setup.tokens["bot"], timeout=60) as bot:
            start = time.monotonic()
            answer["r"] = bot.get("/v1/inbox", params={"wait": 30})
            took.append(time.monotonic() - start)

    t = threading.Thread(target=long_poll)
    t.start()
    poll(lambda: _inbox_polls(a) >= 1)
    with b.client(b.admin_token) as admin:
        assert admin.delete("/v1/admin/workspaces/acme/members/bot").status_code == 200
    t.join(60)
    assert (answer["r"].status_code, answer["r"].json()["error"]["code"]) == (
        403,
        "agent_removed",
    )
    assert took[0] < 20


def test_a_removed_members_streams_end_at_once_without_another_event(setup: Setup) -> None:
    ended: list[str] = []
    with setup.hub.client(setup.tokens["bot"], timeout=10) as bot:
        with (
            bot.stream("GET", f"/v1/rooms/{setup.room}/stream") as room_stream,
            bot.stream("GET", "/v1/inbox/stream") as inbox_stream,
        ):
            poll(lambda: _open(setup.hub, "room") == 1 and _open(setup.hub, "inbox") == 1)
            with setup.hub.client(setup.hub.admin_token) as admin:
                assert admin.delete("/v1/admin/workspaces/acme/members/bot").status_code == 200
            for name, resp in (("room", room_stream), ("inbox", inbox_stream)):
                deadline = time.monotonic() + 5
                for _ in resp.iter_lines():  # keep-alives every 0.5 s keep a live one going
                    if time.monotonic() > deadline:
                        break
                else:
                    ended.append(name)
    assert ended == ["room", "inbox"]


def _open(hub: HubProcess, kind: str) -> float:
    with hub.client() as c:
        for line in c.get("/metrics").text.splitlines():
            if line.startswith(f'agentpost_open_streams{{kind="{kind}"}}'):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def _inbox_polls(hub: HubProcess) -> float:
    with hub.client() as c:
        for line in c.get("/metrics").text.splitlines():
            if line.startswith('agentpost_open_streams{kind="inbox_poll"}'):
                return float(line.rsplit(" ", 1)[1])
    return 0.0
