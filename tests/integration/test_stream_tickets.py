"""Stream tickets (docs/web.md, docs/api.md): a browser opens one room's stream without a
token in its URL. A ticket opens that stream only, expires quickly, and stops working when
its member is removed or leaves the room."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from hubproc import HubProcess, Setup, make_setup, poll


# One hub per engine for this module; each test makes its own workspace on it (the one
# with a short ticket life starts its own hub).
@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def ticket(hub: HubProcess, token: str, room: str) -> dict[str, str]:
    with hub.client(token) as c:
        r = c.post(f"/v1/rooms/{room}/stream-ticket")
    assert r.status_code == 201, r.text
    assert r.headers["cache-control"] == "no-store"
    body: dict[str, str] = r.json()
    return body


def read_frames(hub: HubProcess, url: str, want: int) -> list[str]:
    """The `data:` lines of the first `want` events of the stream at `url` (no token sent)."""
    got: list[str] = []
    with httpx.Client(base_url=hub.url, timeout=20) as c, c.stream("GET", url) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("data: "):
                got.append(line[6:])
                if len(got) == want:
                    break
    return got


def refusal(hub: HubProcess, url: str, **kw: object) -> tuple[int, str]:
    with httpx.Client(base_url=hub.url, timeout=20) as c:
        r = c.get(url, **kw)  # type: ignore[arg-type]
    return r.status_code, r.json()["error"]["code"]


def test_a_ticket_opens_its_rooms_stream_without_a_token(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["bot"]) as bot:
        for text in ("one", "two"):
            assert bot.post(f"/v1/rooms/{setup.room}/messages", json={"text": text}).is_success
    t = ticket(setup.hub, setup.tokens["alice"], setup.room)
    assert t["stream_url"] == f"/v1/rooms/{setup.room}/stream?ticket={t['ticket']}"
    assert setup.tokens["alice"] not in t["ticket"]
    frames = read_frames(setup.hub, t["stream_url"], 2)
    assert ['"text":"one"' in frames[0], '"text":"two"' in frames[1]] == [True, True]
    # Resumable like any stream: `after` and Last-Event-ID.
    assert '"seq":2' in read_frames(setup.hub, t["stream_url"] + "&after=1", 1)[0]


def test_a_ticket_opens_nothing_else(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as alice:
        r = alice.post(f"/v1/workspaces/{setup.workspace}/rooms", json={"name": "other"})
        other = r.json()["room"]["id"]
    t = ticket(setup.hub, setup.tokens["alice"], setup.room)["ticket"]
    hub = setup.hub
    assert refusal(hub, f"/v1/rooms/{other}/stream", params={"ticket": t}) == (401, "unauthorized")
    for path in (f"/v1/rooms/{setup.room}/events", "/v1/inbox/stream", "/v1/me", "/v1/inbox"):
        assert refusal(hub, path, params={"ticket": t}) == (401, "unauthorized"), path
        bearer = {"Authorization": f"Bearer {t}"}
        assert refusal(hub, path, headers=bearer) == (401, "unauthorized"), path
    with httpx.Client(base_url=hub.url, headers={"Authorization": f"Bearer {t}"}) as c:
        r = c.post(f"/v1/rooms/{setup.room}/messages", json={"text": "with a ticket"})
        assert r.status_code == 401
        r = c.post(f"/v1/rooms/{setup.room}/stream-ticket")
        assert r.status_code == 401
    forged = [
        t[:-2] + ("AA" if not t.endswith("AA") else "BB"),  # another signature
        t.replace(t.split(".")[3], str(int(t.split(".")[3]) + 3_600_000)),  # a later expiry
        t.replace(t.split(".")[1], "mb_" + "0" * 26),  # another member
        "st1.x.y",
        t.rsplit(".", 1)[0] + ".é",  # not ASCII: refused, not a 500
        t.replace(t.split(".")[3], "١" * 13),  # digits, but not ASCII ones
        "",
    ]
    for bad in forged:
        url = f"/v1/rooms/{setup.room}/stream"
        assert refusal(hub, url, params={"ticket": bad}) == (401, "unauthorized"), bad
    with hub.client(hub.admin_token) as admin:  # the admin token gets no ticket either
        assert admin.post(f"/v1/rooms/{setup.room}/stream-ticket").status_code == 401


def test_only_a_participant_gets_a_ticket(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as alice:
        r = alice.post(f"/v1/workspaces/{setup.workspace}/rooms", json={"name": "private"})
        private = r.json()["room"]["id"]
    with setup.hub.client(setup.tokens["carol"]) as carol:
        r = carol.post(f"/v1/rooms/{private}/stream-ticket")
        assert r.status_code == 403
        assert r.json()["error"]["code"] == "channel_membership_required"
        r = carol.post("/v1/rooms/rm_nope/stream-ticket")
        assert r.status_code == 404


def test_a_ticket_expires(make_hub: Callable[..., HubProcess]) -> None:
    hub = make_hub(env={"AGENTPOST_STREAM_TICKET_SECONDS": "0.5"})
    s = make_setup(hub, ["alice"], [])
    t = ticket(hub, s.tokens["alice"], s.room)
    url = t["stream_url"]

    def expired() -> bool:
        with httpx.Client(base_url=hub.url, timeout=20) as c, c.stream("GET", url) as r:
            if r.status_code == 200:
                return False
            r.read()
            assert r.status_code == 401 and "expired" in r.json()["error"]["message"]
            return True

    poll(expired, timeout=30, interval=0.1)


@pytest.mark.parametrize("hard", [False, True])
def test_a_ticket_stops_working_when_its_member_is_removed(setup: Setup, hard: bool) -> None:
    t = ticket(setup.hub, setup.tokens["carol"], setup.room)
    with setup.hub.client(setup.hub.admin_token) as admin:
        r = admin.delete(
            f"/v1/admin/workspaces/{setup.workspace}/members/carol", params={"hard": hard}
        )
        assert r.status_code == 200
    status, code = refusal(setup.hub, t["stream_url"])
    assert (status, code) == ((401, "unauthorized") if hard else (403, "member_removed"))


def test_an_open_ticket_stream_ends_when_its_member_is_removed(setup: Setup) -> None:
    t = ticket(setup.hub, setup.tokens["helper"], setup.room)
    with httpx.Client(base_url=setup.hub.url, timeout=20) as c:
        with c.stream("GET", t["stream_url"]) as r:
            assert r.status_code == 200
            with setup.hub.client(setup.hub.admin_token) as admin:
                gone = admin.delete(f"/v1/admin/workspaces/{setup.workspace}/members/helper")
                assert gone.is_success
            # The hub ends the stream (keep-alives come every 0.5 s in tests).
            for _ in r.iter_lines():
                pass
    with setup.hub.client(setup.tokens["alice"]) as alice:
        assert alice.post(f"/v1/rooms/{setup.room}/messages", json={"text": "x"}).is_success
    assert refusal(setup.hub, t["stream_url"]) == (403, "agent_removed")


def test_a_ticket_stops_working_when_its_member_leaves_the_room(setup: Setup) -> None:
    t = ticket(setup.hub, setup.tokens["carol"], setup.room)
    with setup.hub.client(setup.tokens["alice"]) as alice:
        assert alice.delete(f"/v1/rooms/{setup.room}/participants/carol").is_success
    assert refusal(setup.hub, t["stream_url"]) == (403, "channel_membership_required")
