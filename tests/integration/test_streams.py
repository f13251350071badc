"""Reading: paging, the SSE stream with Last-Event-ID and keep-alives, the inbox
(docs/api.md "Streams and long polls").

One hub per engine serves this module's tests, each in a workspace of its own. The open-stream
gauge counts the whole hub, so a test that waits for its own stream first waits for the
streams of the tests before it to end (the hub ends a stream whose client left at its next
write at the latest: a keep-alive every 0.5 s)."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from hubproc import Setup, poll


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def post(c: httpx.Client, room: str, text: str) -> dict:
    r = c.post(f"/v1/rooms/{room}/messages", json={"text": text})
    assert r.status_code == 201, r.text
    return r.json()["event"]


def test_paging_from_zero_until_an_empty_page(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        for i in range(25):
            post(c, setup.room, f"m{i}")
        seen, after = [], 0
        while True:
            page = c.get(
                f"/v1/rooms/{setup.room}/events", params={"after": after, "limit": 10}
            ).json()["events"]
            if not page:
                break
            seen += page
            after = page[-1]["seq"]
        assert [e["seq"] for e in seen] == list(range(1, 26))
        assert c.get(f"/v1/rooms/{setup.room}/events", params={"limit": 5000}).status_code == 200
        bad = c.get(f"/v1/rooms/{setup.room}/events", params={"after": "x"})
        assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_request")


def read_sse(c: httpx.Client, room: str, headers: dict, want: int) -> tuple[list[dict], list[str]]:
    frames: list[dict] = []
    comments: list[str] = []
    with c.stream("GET", f"/v1/rooms/{room}/stream", headers=headers, timeout=10) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if line.startswith(":"):
                comments.append(line)
            if line.startswith("data:"):
                frames.append(json.loads(line[5:]))
                if len(frames) == want:
                    break
    return frames, comments


def test_stream_delivers_live_events_and_resumes_with_last_event_id(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        for i in range(3):
            post(c, setup.room, f"old{i}")
        poll(lambda: _room_streams(setup) == 0)  # so the one stream counted next is ours

        def later() -> None:
            with setup.hub.client(setup.tokens["carol"]) as other:
                poll(lambda: _stream_open(setup))
                post(other, setup.room, "live")

        t = threading.Thread(target=later)
        t.start()
        frames, _ = read_sse(c, setup.room, {"Last-Event-ID": "1"}, want=3)
        t.join()
        assert [f["text"] for f in frames] == ["old1", "old2", "live"]
        assert [f["seq"] for f in frames] == [2, 3, 4]


def _stream_open(setup: Setup) -> bool:
    with setup.hub.client() as c:
        return 'agentpost_open_streams{kind="room"} 1.0' in c.get("/metrics").text


def _room_streams(setup: Setup) -> float:
    return _open_streams(setup, "room")


def test_stream_sends_keep_alive_comments(setup: Setup) -> None:
    """The fixture's hub sends a keep-alive every 0.5 s of silence."""
    with setup.hub.client(setup.tokens["alice"]) as c:
        comments: list[str] = []
        with c.stream("GET", f"/v1/rooms/{setup.room}/stream", timeout=10) as resp:
            for line in resp.iter_lines():
                if line.startswith(":"):
                    comments.append(line)
                if len(comments) >= 3:
                    break
        assert ": keep-alive" in comments


def test_stream_refuses_non_participant_and_unknown_room(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.get("/v1/rooms/rm_nope/stream")
        assert (r.status_code, r.json()["error"]["code"]) == (404, "room_not_found")


def test_mention_wakes_the_target_inbox_and_ack_moves_the_cursor(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as a, setup.hub.client(setup.tokens["bot"]) as bot:
        ev = post(a, setup.room, "@bot please look, @nobody")
        assert ev["targets"] == ["bot"]
        post(a, setup.room, "no mention")
        page = bot.get("/v1/inbox").json()
        assert [i["event"]["id"] for i in page["items"]] == [ev["id"]]
        assert page["cursor"] == page["items"][0]["cursor"]
        assert (
            bot.post("/v1/inbox/ack", json={"cursor": page["cursor"]}).json()["cursor"]
            == page["cursor"]
        )
        assert bot.get("/v1/inbox").json()["items"] == []
        assert bot.get("/v1/me").json()["inbox_cursor"] == page["cursor"]
        bad = bot.post("/v1/inbox/ack", json={"cursor": -1})
        assert bad.json()["error"]["code"] == "invalid_request"


def test_inbox_long_poll_returns_when_woken(setup: Setup) -> None:
    poll(lambda: _inbox_polls(setup) == 0)  # so the one poll counted next is ours
    with setup.hub.client(setup.tokens["bot"], timeout=30) as bot:
        got: dict = {}

        def wait() -> None:
            got["page"] = bot.get("/v1/inbox", params={"wait": 20}).json()

        t = threading.Thread(target=wait)
        t.start()
        poll(lambda: _inbox_polls(setup) >= 1)
        with setup.hub.client(setup.tokens["alice"]) as a:
            ev = post(a, setup.room, "@bot wake up")
        t.join(20)
        assert [i["event"]["id"] for i in got["page"]["items"]] == [ev["id"]]


def _inbox_polls(setup: Setup) -> float:
    return _open_streams(setup, "inbox_poll")


def _open_streams(setup: Setup, kind: str) -> float:
    with setup.hub.client() as c:
        for line in c.get("/metrics").text.splitlines():
            if line.startswith(f'agentpost_open_streams{{kind="{kind}"}}'):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_inbox_stream_resumes_from_the_acked_cursor(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as a, setup.hub.client(setup.tokens["bot"]) as bot:
        first = post(a, setup.room, "@bot one")
        second = post(a, setup.room, "@bot two")
        cursor = bot.get("/v1/inbox").json()["items"][0]["cursor"]
        bot.post("/v1/inbox/ack", json={"cursor": cursor})
        with bot.stream("GET", "/v1/inbox/stream", timeout=10) as resp:
            for line in resp.iter_lines():
                if line.startswith("data:"):
                    item = json.loads(line[5:])
                    break
        assert item["event"]["id"] == second["id"] != first["id"]


def test_removed_member_is_refused_at_once(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["bot"]) as bot:
        assert bot.get("/v1/me").status_code == 200
        with setup.hub.client(setup.hub.admin_token) as admin:
            r = admin.delete(f"/v1/admin/workspaces/{setup.workspace}/members/bot")
            assert r.status_code == 200
        r = bot.post(f"/v1/rooms/{setup.room}/messages", json={"text": "still here?"})
        assert (r.status_code, r.json()["error"]["code"]) == (403, "agent_removed")
    with setup.hub.client(setup.tokens["helper"]) as helper:
        with setup.hub.client(setup.hub.admin_token) as admin:
            admin.delete(
                f"/v1/admin/workspaces/{setup.workspace}/members/helper", params={"hard": "true"}
            )
        gone = helper.get("/v1/me")
        assert (gone.status_code, gone.json()["error"]["code"]) == (403, "agent_removed")
    with setup.hub.client(setup.tokens["alice"]) as a:
        ev = post(a, setup.room, "@bot @helper anyone?")
        assert ev["targets"] == []


def test_removed_members_open_streams_end_and_deliver_nothing_new(setup: Setup) -> None:
    import time

    poll(lambda: _room_streams(setup) == 0)  # so the one stream counted next is ours
    with setup.hub.client(setup.tokens["bot"], timeout=10) as bot:
        got: list[str] = []
        ended: list[bool] = []
        with (
            bot.stream("GET", f"/v1/rooms/{setup.room}/stream") as room_stream,
            bot.stream("GET", "/v1/inbox/stream") as inbox_stream,
        ):
            poll(lambda: _stream_open(setup))
            with setup.hub.client(setup.hub.admin_token) as admin:
                r = admin.delete(f"/v1/admin/workspaces/{setup.workspace}/members/bot")
                assert r.status_code == 200
            with setup.hub.client(setup.tokens["alice"]) as a:
                post(a, setup.room, "@bot after your removal")
            for resp in (room_stream, inbox_stream):
                deadline = time.monotonic() + 10
                for line in resp.iter_lines():  # keep-alives arrive every 0.5 s
                    if line.startswith("data:"):
                        got.append(line)
                    if time.monotonic() > deadline:
                        break
                else:
                    ended.append(True)
        assert got == []
        assert ended == [True, True]  # both streams ended by themselves
