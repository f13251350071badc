"""Retention (issue 31, docs/operations.md "Retention") on both engines: settings per
workspace and per room, checked and refused like every input; the hub's sweep turns old
events into tombstones that keep their place (seqs, paging, replies), expires old files
(410 media_expired) and frees bytes nothing names, never what an unacknowledged inbox item
still needs, and leaves rooms without retention alone. A hub killed with SIGKILL in the
middle of a sweep batch, or between setting bytes aside and removing them, restarts and
finishes the sweep with nothing lost or broken (`db verify` clean)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hubproc import HubProcess, Setup, make_setup, poll

FAST = {"AGENTPOST_SWEEP_INTERVAL": "0.2", "AGENTPOST_BLOB_FREE_GRACE": "0"}
CRASH_ENV = "AGENTPOST_RETENTION_CRASH"


def _events(hub: HubProcess, token: str, room: str, after: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with hub.client(token) as c:
        while True:
            r = c.get(f"/v1/rooms/{room}/events", params={"after": after, "limit": 500})
            assert r.status_code == 200, r.text
            page = r.json()["events"]
            if not page:
                return out
            out += page
            after = page[-1]["seq"]


def _expired(ev: dict[str, Any]) -> bool:
    return bool(ev["redacted"]) and "retention" in ev["metadata"]


def _put(hub: HubProcess, token: str, path: str, body: Any) -> Any:
    with hub.client(token) as c:
        return c.put(path, json=body)


def _verify(hub: HubProcess) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    if hub.db_url is not None:
        env["AGENTPOST_DB"] = hub.db_url
    p = subprocess.run(
        [sys.executable, "-m", "agentpost", "db", "verify", "--data", str(hub.data_dir), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    report: dict[str, Any] = json.loads(p.stdout)
    return report


@pytest.mark.parametrize("engine", ["sqlite", "postgres"], indirect=True)
def test_settings_are_checked_inherited_and_refused_without_change(
    hub: HubProcess, setup: Setup
) -> None:
    alice, bot, admin = setup.tokens["alice"], setup.tokens["bot"], hub.admin_token
    room = f"/v1/rooms/{setup.room}/retention"
    ws = f"/v1/admin/workspaces/{setup.workspace}/retention"
    r = _put(hub, admin, ws, {"events_seconds": 30 * 86400})
    assert r.status_code == 200, r.text
    with hub.client(alice) as c:
        got = c.get(room).json()["retention"]
    assert got == {
        "events_seconds": None,
        "media_seconds": None,
        "effective": {"events_seconds": 30 * 86400, "media_seconds": None},
    }
    r = _put(hub, alice, room, {"media_seconds": 7 * 86400})
    assert r.json()["retention"]["effective"] == {
        "events_seconds": 30 * 86400,
        "media_seconds": 7 * 86400,
    }
    # A participant keeps for less than the workspace, a day at least; only the admin keeps
    # for longer, for ever, or for less than a day.
    r = _put(hub, alice, room, {"events_seconds": 0})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", r.text
    assert "only the admin for longer" in r.json()["error"]["message"]
    r = _put(hub, alice, room, {"events_seconds": 3600})
    assert r.status_code == 403 and "a day" in r.json()["error"]["message"], r.text
    r = _put(hub, admin, room, {"events_seconds": 0})  # for ever here, whatever the workspace
    assert r.json()["retention"]["effective"]["events_seconds"] is None
    r = _put(hub, alice, room, {"events_seconds": 2 * 86400})  # less than the workspace: hers
    assert r.status_code == 200, r.text
    before = r.json()["retention"]
    for body in (
        {"events_seconds": -1},
        {"events_seconds": "30d"},
        {"media_seconds": 10**12},
        {"keep": 1},
    ):
        r = _put(hub, alice, room, body)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request", r.text
    assert _put(hub, bot, room, {"events_seconds": 1}).json()["error"]["code"] == "forbidden"
    assert _put(hub, alice, ws, {"events_seconds": 1}).status_code == 401
    with hub.client(alice) as c:
        assert c.get(room).json()["retention"] == before
    r = _put(hub, admin, "/v1/admin/workspaces/nope/retention", {"events_seconds": 1})
    assert r.json()["error"]["code"] == "no_workspace"


def _seed(hub: HubProcess, setup: Setup, n: int) -> None:
    with hub.client(setup.tokens["alice"]) as c:
        for i in range(n):
            r = c.post(f"/v1/rooms/{setup.room}/messages", json={"text": f"old secret {i}"})
            assert r.status_code == 201, r.text


@pytest.mark.parametrize("engine", ["sqlite", "postgres"], indirect=True)
def test_old_events_become_tombstones_files_go_and_what_is_needed_stays(
    make_hub: Callable[..., HubProcess], tmp_path: Path
) -> None:
    hub = make_hub(env=FAST)
    setup = make_setup(hub, ["alice", "carol"], ["bot"])
    other = make_setup(hub, ["dora"], [], room="elsewhere", workspace="other")
    alice = setup.tokens["alice"]
    with hub.client(alice) as c:
        # Only a mention wakes bot (not every message, as the room's sole agent): bot owes
        # an acknowledgement for the mention alone, the room's first event. Tombstones are
        # removed in seq order, so it keeps the ones after it in place until bot acks.
        assert c.patch(f"/v1/rooms/{setup.room}", json={"router": "none"}).status_code == 200
        held = c.post(f"/v1/rooms/{setup.room}/messages", json={"text": "@bot keep this"})
        held_event = held.json()["event"]
        # A file whose upload expires stays while a later event that still stands carries it.
        carried = c.post(f"/v1/rooms/{setup.room}/media", files={"file": ("c.txt", b"carried\n")})
        carried_id = carried.json()["media"]["id"]
        later = c.post(
            f"/v1/rooms/{setup.room}/messages",
            json={"text": "@bot look at this", "attachments": [carried_id]},
        ).json()["event"]
        r = c.post(f"/v1/rooms/{setup.room}/messages", json={"text": "the first secret"})
        first = r.json()["event"]
        up = c.post(f"/v1/rooms/{setup.room}/media", files={"file": ("a.txt", b"old bytes\n")})
        media_event = up.json()["event"]
        shared = c.post(f"/v1/rooms/{setup.room}/media", files={"file": ("s.txt", b"shared\n")})
        c.post(
            f"/v1/rooms/{setup.room}/messages", json={"text": "reply", "in_reply_to": first["id"]}
        )
    with hub.client(other.tokens["dora"]) as d:  # the same bytes in a room that keeps them
        kept = d.post(f"/v1/rooms/{other.room}/media", files={"file": ("s.txt", b"shared\n")})
        assert kept.status_code == 201
    blob = hub.data_dir / "blobs" / up.json()["media"]["sha256"][:2] / up.json()["media"]["sha256"]
    assert blob.exists()
    before = _events(hub, alice, setup.room)

    r = _put(hub, hub.admin_token, f"/v1/rooms/{setup.room}/retention", {"events_seconds": 1})
    assert r.status_code == 200, r.text

    # A retention longer than the clock goes back (a century) expires nothing.
    r = _put(
        hub,
        hub.admin_token,
        f"/v1/rooms/{other.room}/retention",
        {"events_seconds": 99 * 365 * 86400},
    )
    assert r.status_code == 200, r.text

    def swept() -> list[dict[str, Any]] | None:
        evs = _events(hub, alice, setup.room)
        return evs if sum(map(_expired, evs)) == len(evs) - 2 else None

    after = poll(swept, timeout=30)
    assert [e["seq"] for e in after] == [e["seq"] for e in before]  # every place kept
    assert [e["id"] for e in after] == [e["id"] for e in before]
    for e in after:
        if e["id"] in (held_event["id"], later["id"]):
            assert e["text"].startswith("@bot") and not e["redacted"]  # bot has not acked them
            continue
        assert e["text"] == "" and e["attachments"] == [] and e["redacted"]
        assert e["metadata"]["retention"]["expired_at"] >= e["created_at"]
    assert after[6]["in_reply_to"] == first["id"]  # a reply still names what it answered
    assert [e["seq"] for e in _events(hub, alice, setup.room, after=4)] == [5, 6, 7]  # after=
    with hub.client(alice) as c:
        gone = c.get(f"/v1/media/{media_event['attachments'][0]['id']}")
        assert gone.status_code == 410 and gone.json()["error"]["code"] == "media_expired"
        found = c.get("/v1/search", params={"q": "secret"}).json()
        assert found["hits"] == [], found  # search forgot the expired texts
        assert c.get(f"/v1/media/{carried_id}").content == b"carried\n"  # still carried
    poll(lambda: not blob.exists(), timeout=30)  # bytes no kept row names: freed
    with hub.client(other.tokens["dora"]) as d:  # bytes another room still names: kept
        assert d.get(f"/v1/media/{kept.json()['media']['id']}").content == b"shared\n"
    assert shared.status_code == 201

    assert _verify(hub)["ok"]
    # Once bot acknowledges its inbox, the held event goes too; then the tombstones, kept as
    # long again as their events were, are removed for good, in seq order, with bot's inbox
    # items. The room's seqs go on where they were.
    with hub.client(setup.tokens["bot"]) as b:
        items = b.get("/v1/inbox", params={"after": 0}).json()
        assert b.post("/v1/inbox/ack", json={"cursor": items["cursor"]}).status_code == 200
    poll(lambda: _events(hub, alice, setup.room) == [], timeout=30)
    with hub.client(alice) as c:
        assert c.get(f"/v1/events/{first['id']}").status_code == 404
        assert c.get(f"/v1/rooms/{setup.room}").json()["room"]["last_seq"] == len(before)
        r = c.post(f"/v1/rooms/{setup.room}/messages", json={"text": "a new day"})
        assert r.json()["event"]["seq"] == len(before) + 1
    with hub.client(setup.tokens["bot"]) as b:
        assert b.get("/v1/inbox", params={"after": 0}).json()["items"] == []
    # A room without retention is untouched.
    assert not any(map(_expired, _events(hub, other.tokens["dora"], other.room)))
    assert _verify(hub)["ok"]


@pytest.mark.parametrize("engine", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("point", ["step:2", "free:1", "compact:2"])
def test_a_hub_killed_mid_sweep_finishes_it_after_the_restart(
    make_hub: Callable[..., HubProcess], point: str
) -> None:
    hub = make_hub(env={**FAST, CRASH_ENV: point})
    setup = make_setup(hub, ["alice"], [])
    _seed(hub, setup, 450)  # three batches of events
    with hub.client(setup.tokens["alice"]) as c:
        up = c.post(f"/v1/rooms/{setup.room}/media", files={"file": ("a.txt", b"to go\n")})
        sha = up.json()["media"]["sha256"]
    r = _put(hub, hub.admin_token, f"/v1/rooms/{setup.room}/retention", {"events_seconds": 1})
    assert r.status_code == 200
    code = hub.wait_exit(60)
    hub.stop()  # closes what the test held of it
    assert code == -9, hub.log_path.read_text() if hub.log_path else code  # SIGKILL, mid-sweep
    hub.env = FAST
    hub.start()
    # Every event expires, then every tombstone goes: the room's events run from its floor.
    poll(lambda: _events(hub, setup.tokens["alice"], setup.room) == [], timeout=60)
    poll(lambda: not (hub.data_dir / "blobs" / sha[:2] / sha).exists(), timeout=30)
    poll(lambda: not list((hub.data_dir / "blobs" / "tmp").glob(".gone-*")), timeout=30)
    assert _verify(hub)["ok"]


@pytest.mark.parametrize("engine", ["sqlite", "postgres"], indirect=True)
def test_a_delegation_acked_but_unanswered_outlives_its_window_and_its_receipt_wakes(
    make_hub: Callable[..., HubProcess],
) -> None:
    """docs/operations.md "Retention": acknowledging a delegation is not answering it. It
    stays whole past the room's retention until the agent it named answers, and that late
    receipt still reaches the delegator; then it expires like any other event."""
    hub = make_hub(env=FAST)
    setup = make_setup(hub, ["alice"], ["boss", "bot"])
    with hub.client(setup.tokens["boss"]) as c:  # an agent's mention: a delegation
        asked = c.post(f"/v1/rooms/{setup.room}/messages", json={"text": "@bot sum it up"})
        assert asked.status_code == 201, asked.text
        task = asked.json()["event"]
        assert task["metadata"].get("delegated_to") == ["bot"], task
        plain = c.post(f"/v1/rooms/{setup.room}/messages", json={"text": "just chatting"})
        assert plain.status_code == 201
    with hub.client(setup.tokens["bot"]) as b:  # bot takes it (acks) but has not answered
        items = b.get("/v1/inbox", params={"after": 0}).json()
        assert task["id"] in [i["event"]["id"] for i in items["items"]]
        assert b.post("/v1/inbox/ack", json={"cursor": items["cursor"]}).status_code == 200
    r = _put(hub, hub.admin_token, f"/v1/rooms/{setup.room}/retention", {"events_seconds": 1})
    assert r.status_code == 200, r.text

    def plain_expired() -> list[dict[str, Any]] | None:
        evs = _events(hub, setup.tokens["alice"], setup.room)
        return (
            evs
            if any(e["id"] == plain.json()["event"]["id"] and _expired(e) for e in evs)
            else None
        )

    evs = poll(plain_expired, timeout=30)  # the window passed: the sweep has been by
    still = next(e for e in evs if e["id"] == task["id"])
    assert not _expired(still) and still["text"] == "@bot sum it up"

    with hub.client(setup.tokens["boss"]) as c:
        cursor = c.get("/v1/inbox", params={"after": 0}).json()["cursor"]
    with hub.client(setup.tokens["bot"]) as b:
        r = b.post(
            f"/v1/rooms/{setup.room}/messages",
            json={"text": "the sum: 42", "in_reply_to": task["id"], "reply_kind": "result"},
        )
        assert r.status_code == 201, r.text
        receipt = r.json()["event"]
    with hub.client(setup.tokens["boss"]) as c:  # the delegator is woken by the receipt
        woke = c.get("/v1/inbox", params={"after": cursor}).json()["items"]
        assert receipt["id"] in [i["event"]["id"] for i in woke], woke
    # Answered, the delegation is no longer needed: it expires like the rest.
    poll(
        lambda: (
            any(
                e["id"] == task["id"] and _expired(e)
                for e in _events(hub, setup.tokens["alice"], setup.room)
            )
            or not any(
                e["id"] == task["id"] for e in _events(hub, setup.tokens["alice"], setup.room)
            )
        ),
        timeout=30,
    )
    assert _verify(hub)["ok"]
