"""`GET /v1/events/{event}`: one event for a participant of its room; everyone else gets the
same 404 as for an id that does not exist (docs/api.md)."""

from __future__ import annotations

import pytest

from hubproc import Setup, fresh_workspace, make_setup


# One hub per engine for this module; each test makes its own workspace on it.
@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def test_a_participant_reads_one_event_as_the_room_serves_it(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as alice:
        posted = alice.post(f"/v1/rooms/{setup.room}/messages", json={"text": "hello @bot"})
        ev = posted.json()["event"]
        got = alice.get(f"/v1/events/{ev['id']}")
        listed = alice.get(f"/v1/rooms/{setup.room}/events").json()["events"]
    assert got.status_code == 200
    assert got.json() == {"event": ev} and listed == [ev]


def test_the_event_is_its_current_body_receipts_stamped(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["helper"]) as helper:
        e1 = helper.post(f"/v1/rooms/{setup.room}/messages", json={"text": "@bot go"})
        e1_id = e1.json()["event"]["id"]
    with setup.hub.client(setup.tokens["bot"]) as bot:
        body = {"text": "done", "in_reply_to": e1_id, "reply_kind": "result"}
        assert bot.post(f"/v1/rooms/{setup.room}/messages", json=body).status_code == 201
        got = bot.get(f"/v1/events/{e1_id}").json()["event"]
    assert got["metadata"]["receipt_from"] == ["bot"]


def test_unknown_foreign_and_other_rooms_events_are_all_event_not_found(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as alice:
        r = alice.post(f"/v1/workspaces/{setup.workspace}/rooms", json={"name": "private"})
        private = r.json()["room"]["id"]
        hidden = alice.post(f"/v1/rooms/{private}/messages", json={"text": "secret"})
        hidden_id = hidden.json()["event"]["id"]
    other = make_setup(setup.hub, ["olga"], ["obot"], workspace=fresh_workspace())
    with setup.hub.client(setup.tokens["bot"]) as bot:
        not_mine = bot.get(f"/v1/events/{hidden_id}")
        unknown = bot.get("/v1/events/ev_00000000000000000000000000")
    with setup.hub.client(other.tokens["olga"]) as olga:
        foreign = olga.get(f"/v1/events/{hidden_id}")
    for r in (not_mine, unknown, foreign):
        assert r.status_code == 404, r.text
        assert r.json()["error"]["code"] == "event_not_found"


def test_without_a_token_it_is_unauthorized(setup: Setup) -> None:
    with setup.hub.client() as anon:
        r = anon.get("/v1/events/ev_00000000000000000000000000")
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
