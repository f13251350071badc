"""Read markers (docs/api.md "Read markers"): `POST /v1/rooms/{room}/read {"seq"}` records
how far a member has read a room; it never moves back, nor past the room's last event. A
room as its member sees it carries `read_seq` and `unread`: others' events past the marker
that are not edits, reactions or redactions. Humans alice, carol; agents bot, helper.

One hub per engine serves the tests that make their own workspace; the upgrade test starts
its own."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from agentpost.client import HubClient
from hubproc import HubProcess, Setup, make_setup


def post(c: httpx.Client, room: str, text: str) -> dict[str, Any]:
    r = c.post(f"/v1/rooms/{room}/messages", json={"text": text})
    assert r.status_code == 201, r.text
    event: dict[str, Any] = r.json()["event"]
    return event


def numbers(c: httpx.Client, room: str) -> tuple[int, int]:
    r = c.get(f"/v1/rooms/{room}")
    assert r.status_code == 200, r.text
    return r.json()["room"]["read_seq"], r.json()["room"]["unread"]


def mark(c: httpx.Client, room: str, seq: object) -> httpx.Response:
    return c.post(f"/v1/rooms/{room}/read", json={"seq": seq})


def clients(s: Setup, *names: str) -> list[httpx.Client]:
    return [s.hub.client(s.tokens[n]) for n in names]


def test_unread_counts_others_messages_not_own_nor_relations(shared_setup: Setup) -> None:
    s = shared_setup
    alice, carol = clients(s, "alice", "carol")
    with alice, carol:
        post(alice, s.room, "a1")
        post(alice, s.room, "a2")
        c1 = post(carol, s.room, "c1")
        post(carol, s.room, "c2")
        post(carol, s.room, "c3")
        # Relations by each: an edit of one's own message, a reaction, a redaction.
        r = carol.post(f"/v1/rooms/{s.room}/events/{c1['id']}/edits", json={"text": "c1!"})
        assert r.status_code == 201, r.text
        r = alice.post(f"/v1/rooms/{s.room}/events/{c1['id']}/reactions", json={"emoji": "👍"})
        assert r.status_code == 201, r.text
        r = carol.post(f"/v1/rooms/{s.room}/events/{c1['id']}/redactions", json={})
        assert r.status_code == 201, r.text
        assert numbers(alice, s.room) == (0, 3)  # c1, c2, c3
        assert numbers(carol, s.room) == (0, 2)  # a1, a2
    with s.hub.client(s.tokens["bot"]) as bot:
        assert numbers(bot, s.room) == (0, 5)  # nothing of its own


def test_read_moves_forward_only_and_never_past_the_last_event(shared_setup: Setup) -> None:
    s = shared_setup
    alice, carol = clients(s, "alice", "carol")
    with alice, carol:
        seqs = [post(carol, s.room, f"c{i}")["seq"] for i in range(4)]
        r = mark(alice, s.room, seqs[1])
        assert r.status_code == 200, r.text
        assert r.json() == {"room": s.room, "read_seq": seqs[1], "unread": 2}
        # Back: nothing moves; the answer says where the marker stands.
        assert mark(alice, s.room, seqs[0]).json() == {
            "room": s.room,
            "read_seq": seqs[1],
            "unread": 2,
        }
        assert numbers(alice, s.room) == (seqs[1], 2)
        # Past the last event: up to it, so later events are still unread when they come.
        assert mark(alice, s.room, 2**63 - 1).json()["read_seq"] == seqs[-1]
        assert numbers(alice, s.room) == (seqs[-1], 0)
        later = post(carol, s.room, "later")
        assert numbers(alice, s.room) == (seqs[-1], 1)
        assert mark(alice, s.room, later["seq"]).json()["unread"] == 0
        assert mark(alice, s.room, 0).json()["read_seq"] == later["seq"]
        # Each member has a marker of its own.
        assert numbers(carol, s.room) == (0, 0)


def test_a_bad_body_is_refused_and_changes_nothing(shared_setup: Setup) -> None:
    s = shared_setup
    alice, carol = clients(s, "alice", "carol")
    with alice, carol:
        for i in range(3):
            post(carol, s.room, f"c{i}")
        assert mark(alice, s.room, 1).status_code == 200
        for bad in [{"seq": -1}, {"seq": "3"}, {"seq": 2, "extra": 1}, {}, {"seq": 1.5}]:
            r = alice.post(f"/v1/rooms/{s.room}/read", json=bad)
            assert r.status_code == 400, (bad, r.text)
            assert r.json()["error"]["code"] == "invalid_request", bad
        for bad_seq in [True, None, 2**64]:
            r = mark(alice, s.room, bad_seq)
            assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request"), bad_seq
        r = alice.post(f"/v1/rooms/{s.room}/read", content=b"{not json")
        assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_json")
        assert numbers(alice, s.room) == (1, 2)


def test_only_a_participant_has_a_marker(shared_setup: Setup) -> None:
    s = shared_setup
    hub = s.hub
    with hub.client(s.tokens["alice"]) as alice:
        r = alice.post(f"/v1/workspaces/{s.workspace}/rooms", json={"name": "private"})
        private = r.json()["room"]["id"]
        post(alice, private, "for alice only")
    with hub.client(s.tokens["carol"]) as carol:
        r = mark(carol, private, 1)
        assert (r.status_code, r.json()["error"]["code"]) == (403, "channel_membership_required")
        r = mark(carol, "rm_01J0000000000000000000000Z", 1)
        assert (r.status_code, r.json()["error"]["code"]) == (404, "room_not_found")
    # The admin manages rooms but reads none: no marker (as for the inbox), and its view of
    # a room has zeros.
    with hub.client(hub.admin_token) as admin:
        r = mark(admin, s.room, 1)
        assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")
        assert numbers(admin, private) == (0, 0)
    with hub.client(s.tokens["alice"]) as alice:
        assert numbers(alice, private) == (0, 0)  # her own message only


def test_the_room_list_carries_each_rooms_numbers(shared_setup: Setup) -> None:
    s = shared_setup
    alice, carol = clients(s, "alice", "carol")
    with alice, carol:
        r = carol.post(
            f"/v1/workspaces/{s.workspace}/rooms", json={"name": "side", "participants": ["alice"]}
        )
        side = r.json()["room"]["id"]
        for i in range(3):
            post(carol, side, f"side {i}")
        post(carol, s.room, "general 1")
        last = post(carol, s.room, "general 2")
        post(alice, s.room, "mine")
        assert mark(alice, s.room, last["seq"] - 1).status_code == 200
        rooms = alice.get(f"/v1/workspaces/{s.workspace}/rooms").json()["rooms"]
        got = {r["name"]: (r["read_seq"], r["unread"]) for r in rooms}
        assert got == {"general": (last["seq"] - 1, 1), "side": (0, 3)}
        # Every room answer carries the caller's numbers, e.g. after a settings change.
        r = alice.patch(f"/v1/rooms/{side}", json={"router": "none"})
        assert (r.json()["room"]["read_seq"], r.json()["room"]["unread"]) == (0, 3)


def test_the_python_client_marks_and_reads(shared_setup: Setup) -> None:
    s = shared_setup
    with s.hub.client(s.tokens["carol"]) as carol:
        for i in range(2):
            post(carol, s.room, f"c{i}")
    with HubClient(s.hub.url, s.tokens["alice"]) as client:
        room = client.room(s.room)
        assert (room.read_seq, room.unread) == (0, 2)
        marker = client.mark_read(s.room, 1)
        assert (marker.room, marker.read_seq, marker.unread) == (s.room, 1, 1)
        listed = {r.id: r for r in client.rooms(s.workspace)}
        assert (listed[s.room].read_seq, listed[s.room].unread) == (1, 1)


def _before_read_markers(hub: HubProcess) -> None:
    """Make the stopped hub's database what a hub of schema 11 left: no read markers, no
    sender id on events."""
    statements = [
        "DROP INDEX events_unread",
        "ALTER TABLE events DROP COLUMN sender_id",
        "DROP TABLE read_markers",
        "DELETE FROM schema_version WHERE version = 12",
    ]
    if hub.db_url is None:
        conn = sqlite3.connect(Path(hub.data_dir) / "hub.sqlite3")
        for sql in statements:
            conn.execute(sql)
        conn.commit()
        conn.close()
        return
    import psycopg

    with psycopg.connect(hub.db_url, autocommit=True) as conn:
        for sql in statements:
            conn.execute(sql)


def test_upgrading_a_hub_learns_who_sent_its_older_events(
    make_hub: Callable[..., HubProcess],
) -> None:
    hub = make_hub()
    s = make_setup(hub, ["alice", "carol"], [])
    alice, carol = clients(s, "alice", "carol")
    with alice, carol:
        post(alice, s.room, "mine, from before")
        post(carol, s.room, "a NUL \x00 and a literal \\u0000, from before")
        e = post(carol, s.room, "from before")
        r = alice.post(f"/v1/rooms/{s.room}/events/{e['id']}/reactions", json={"emoji": "👍"})
        assert r.status_code == 201, r.text
    hub.stop()
    _before_read_markers(hub)
    hub.start()
    alice, carol = clients(s, "alice", "carol")
    with alice, carol:
        assert numbers(alice, s.room) == (0, 2)
        assert numbers(carol, s.room) == (0, 1)
        post(carol, s.room, "after")
        assert numbers(alice, s.room) == (0, 3)


def test_the_hub_says_it_has_read_markers(shared_hub: HubProcess) -> None:
    with shared_hub.client() as c:
        features = c.get("/v1/capabilities").json()["features"]
    assert "read_markers" in features
