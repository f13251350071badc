"""A room stream's presence frames (`?presence=1`, docs/api.md "Streams and long polls"): the
room's active participants with `online`, `last_seen` and `worker`, sent at open and then
whenever that changes, as frames without an `id:` line. Without the parameter the stream is
events and comments only. Humans alice, carol; agents bot, helper (owner alice).

The tests that need no particular presence timer share one hub per engine, each in a
workspace of its own; the others start a hub with `AGENTPOST_PRESENCE_PUSH` set: low to see
the timer at work, an hour to see that a frame came without it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from hubproc import HubProcess, Setup, make_setup, poll

FAST = {"AGENTPOST_PRESENCE_PUSH": "0.2"}
MEMBER_FIELDS = {"name", "kind", "online", "last_seen", "worker"}


@dataclass
class Frame:
    event: str
    id: str | None
    data: Any


@dataclass
class Reader:
    """A room stream read on a thread of its own: its frames and comments as they arrive,
    and the raw bytes, until `stop` (keep-alives every 0.5 s let the thread see it)."""

    hub: HubProcess
    url: str
    token: str | None
    frames: list[Frame] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    raw: bytearray = field(default_factory=bytearray)
    status: int | None = None
    _parsed: int = 0  # how much of `raw` was parsed into frames
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Reader:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        poll(lambda: self.comments[:1] == [": stream open"] or self.status not in (None, 200))
        assert self.status == 200
        return self

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        with (
            httpx.Client(base_url=self.hub.url, headers=headers, timeout=20) as c,
            c.stream("GET", self.url) as resp,
        ):
            self.status = resp.status_code
            if resp.status_code != 200:
                return
            for raw in resp.iter_raw():
                self.raw += raw
                # Parse only what ends in a blank line: whole frames.
                while b"\n\n" in self.raw[self._parsed :]:
                    end = self.raw.index(b"\n\n", self._parsed) + 2
                    block = bytes(self.raw[self._parsed : end]).decode()
                    self._parsed = end
                    fields: dict[str, str] = {}
                    for line in block.strip("\n").split("\n"):
                        if line.startswith(":"):
                            self.comments.append(line)
                        else:
                            name, _, value = line.partition(": ")
                            fields[name] = value
                    if "data" in fields:
                        self.frames.append(
                            Frame(fields["event"], fields.get("id"), json.loads(fields["data"]))
                        )
                if self._stop.is_set():
                    return

    def presence(self) -> list[dict[str, Any]]:
        """The data of every presence frame so far."""
        return [f.data for f in self.frames if f.event == "presence"]

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


@pytest.fixture
def reading() -> Any:
    """Start `Reader`s; every one is stopped when the test ends."""
    started: list[Reader] = []

    def start(hub: HubProcess, url: str, token: str | None) -> Reader:
        r = Reader(hub, url, token).start()
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()


def post(hub: HubProcess, token: str, room: str, text: str) -> dict[str, Any]:
    with hub.client(token) as c:
        r = c.post(f"/v1/rooms/{room}/messages", json={"text": text})
    assert r.status_code == 201, r.text
    event: dict[str, Any] = r.json()["event"]
    return event


def by_name(snapshot: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in snapshot["members"]}


def test_the_first_frame_after_open_is_the_rooms_presence(shared_setup: Setup, reading) -> None:  # noqa: ANN001
    s = shared_setup
    post(s.hub, s.tokens["alice"], s.room, "before the stream")
    r = reading(s.hub, f"/v1/rooms/{s.room}/stream?presence=1", s.tokens["carol"])
    poll(lambda: len(r.frames) >= 2)
    first, second = r.frames[:2]
    assert bytes(r.raw).startswith(b": stream open\n\nevent: presence\ndata: {")
    assert (first.event, first.id) == ("presence", None)  # no id: Last-Event-ID stays
    assert [m["name"] for m in first.data["members"]] == ["alice", "bot", "carol", "helper"]
    assert all(set(m) == MEMBER_FIELDS for m in first.data["members"])
    seen = by_name(first.data)
    # alice made the room and posted; carol holds the stream; bot and helper never came.
    assert {n: m["online"] for n, m in seen.items()} == {
        "alice": True,
        "bot": False,
        "carol": True,
        "helper": False,
    }
    assert seen["bot"]["last_seen"] is None and seen["bot"]["worker"] is None
    assert seen["alice"]["kind"] == "human" and seen["bot"]["kind"] == "agent"
    assert (second.event, second.id, second.data["text"]) == ("event", "1", "before the stream")


def test_an_agent_that_posts_is_online_in_the_frame_after_its_message(
    make_hub: Callable[..., HubProcess],
    reading,  # noqa: ANN001
) -> None:
    """No timer at work (an hour): the frames come from the stream's own reads of the room,
    after the page with bot's message, and on the wake-up a removal sends."""
    hub = make_hub(env={"AGENTPOST_PRESENCE_PUSH": "3600"})
    s = make_setup(hub, ["alice", "carol"], ["bot", "helper"])
    r = reading(hub, f"/v1/rooms/{s.room}/stream?presence=1", s.tokens["alice"])
    poll(lambda: r.presence())
    assert by_name(r.presence()[0])["bot"]["online"] is False
    post(hub, s.tokens["bot"], s.room, "I am here")  # bot's first request ever
    # No member list was asked for.
    poll(lambda: any(by_name(p)["bot"]["online"] for p in r.presence()))
    posted = [(f.event, f.id) for f in r.frames].index(("event", "1"))
    online = next(
        i
        for i, f in enumerate(r.frames)
        if f.event == "presence" and by_name(f.data)["bot"]["online"]
    )
    assert online == posted + 1
    assert by_name(r.frames[online].data)["bot"]["last_seen"] is not None
    with hub.client(hub.admin_token) as admin:
        assert admin.delete("/v1/admin/workspaces/acme/members/helper").status_code == 200
    poll(lambda: "helper" not in by_name(r.presence()[-1]))
    assert list(by_name(r.presence()[-1])) == ["alice", "bot", "carol"]


def test_without_presence_the_stream_is_events_and_comments_only(
    shared_setup: Setup,
    reading,  # noqa: ANN001
) -> None:
    s = shared_setup
    post(s.hub, s.tokens["alice"], s.room, "one")
    readers = [
        reading(s.hub, f"/v1/rooms/{s.room}/stream{query}", s.tokens["carol"])
        for query in ("", "?presence=0")
    ]
    post(s.hub, s.tokens["bot"], s.room, "an agent comes online")
    for r in readers:
        poll(lambda r=r: len(r.frames) >= 2 and ": keep-alive" in r.comments)
        assert [(f.event, f.id) for f in r.frames] == [("event", "1"), ("event", "2")]
        assert b"presence" not in bytes(r.raw)
        assert bytes(r.raw).startswith(b": stream open\n\nid: 1\nevent: event\ndata: {")


def test_a_bad_presence_value_is_refused(shared_setup: Setup) -> None:
    s = shared_setup
    with s.hub.client(s.tokens["alice"]) as c:
        for bad in ["2", "true", "", "yes", "01", " 1"]:
            r = c.get(f"/v1/rooms/{s.room}/stream", params={"presence": bad})
            assert r.status_code == 400, (bad, r.text)
            error = r.json()["error"]
            assert (error["code"], error["field"]) == ("invalid_request", "presence")


def test_a_stream_ticket_opens_the_stream_with_presence(shared_setup: Setup, reading) -> None:  # noqa: ANN001
    s = shared_setup
    for text in ("one", "two"):
        post(s.hub, s.tokens["alice"], s.room, text)
    with s.hub.client(s.tokens["carol"]) as c:
        ticket = c.post(f"/v1/rooms/{s.room}/stream-ticket").json()
    # What the page does: the ticket's URL, then `after`, then `presence`.
    r = reading(s.hub, ticket["stream_url"] + "&after=1&presence=1", None)
    poll(lambda: len(r.frames) >= 2)
    assert [(f.event, f.id) for f in r.frames[:2]] == [("presence", None), ("event", "2")]
    assert by_name(r.frames[0].data)["carol"]["online"] is True


def test_presence_changes_are_pushed_on_the_timer(
    make_hub: Callable[..., HubProcess],
    reading,  # noqa: ANN001
) -> None:
    """With no event at all: a member seen elsewhere comes online, a softly removed member
    leaves the frame (and the room's `participants`), and keep-alives still go out while
    nothing changes."""
    hub = make_hub(env=FAST)
    s = make_setup(hub, ["alice", "carol"], ["bot", "helper"])
    r = reading(hub, f"/v1/rooms/{s.room}/stream?presence=1", s.tokens["alice"])
    poll(lambda: r.presence())
    assert by_name(r.presence()[-1])["carol"]["online"] is False
    with hub.client(s.tokens["carol"]) as c:
        assert c.get("/v1/me").status_code == 200
    poll(lambda: by_name(r.presence()[-1])["carol"]["online"])
    with hub.client(hub.admin_token) as admin:
        assert admin.delete("/v1/admin/workspaces/acme/members/helper").status_code == 200
    poll(lambda: "helper" not in by_name(r.presence()[-1]))
    assert list(by_name(r.presence()[-1])) == ["alice", "bot", "carol"]
    with hub.client(s.tokens["alice"]) as c:
        assert "helper" not in c.get(f"/v1/rooms/{s.room}").json()["room"]["participants"]
    # Nothing changes now: only keep-alives, and no frame repeats the last snapshot.
    before = len(r.comments)
    poll(lambda: r.comments[before:].count(": keep-alive") >= 2)
    assert all(a != b for a, b in zip(r.presence(), r.presence()[1:], strict=False))
    assert all(f.id is None for f in r.frames if f.event == "presence")


def test_the_hub_says_it_has_room_presence(shared_hub: HubProcess) -> None:
    with shared_hub.client() as c:
        assert "room_presence" in c.get("/v1/capabilities").json()["features"]
