"""A person who asks is told; `/stop` and `POST /v1/rooms/{room}/cancel` reach the room's
agents; a Worker can read who owns a member (docs/delegation.md, docs/connect.md). Real hub, both engines."""

from __future__ import annotations

import pytest
from routing_helpers import Room, inbox, remove

from hubproc import HubProcess, make_setup


@pytest.fixture
def room(hub: HubProcess) -> Room:
    """Workspace acme: humans `hana`, `ivo`; agents `a`, `b` (owned by hana); room general."""
    s = make_setup(hub, ["hana", "ivo"], ["a", "b"])
    return Room(hub, s.tokens, s.room)


def test_agent_reply_to_a_person_wakes_that_person_once_per_replier(room: Room) -> None:
    asked = room.say("hana", "@a what is 2+2?")
    first = room.say("a", "4", in_reply_to=asked["id"])
    assert first["targets"] == ["hana"]
    again = room.say("a", "still 4", in_reply_to=asked["id"])
    assert again["targets"] == []
    other = room.say("b", "I agree: 4", in_reply_to=asked["id"])
    assert other["targets"] == ["hana"]
    assert inbox(room.hub, room.tokens["hana"]) == [first["id"], other["id"]]


def test_reply_to_a_person_is_no_receipt_and_keeps_agent_routing(room: Room) -> None:
    asked = room.say("hana", "@a ask b for help")
    ev = room.say("a", "@b please help", in_reply_to=asked["id"])
    assert ev["targets"] == ["b", "hana"]
    assert ev["metadata"]["delegated_to"] == ["b"]
    assert ev["reply_kind"] is None


def test_reply_to_a_person_who_left_the_room_wakes_no_one(room: Room) -> None:
    asked = room.say("ivo", "@a hello")
    remove(room.hub, "ivo", "room", room)
    ev = room.say("a", "hello ivo", in_reply_to=asked["id"])
    assert ev["targets"] == []
    assert inbox(room.hub, room.tokens["ivo"]) == []


def test_reply_to_a_removed_person_wakes_no_one(room: Room) -> None:
    asked = room.say("ivo", "@a hello")
    remove(room.hub, "ivo", "soft")
    assert room.say("a", "hello ivo", in_reply_to=asked["id"])["targets"] == []


def test_agent_reply_to_an_agent_is_unchanged(room: Room) -> None:
    said = room.say("b", "thinking aloud")
    assert room.say("a", "noted", in_reply_to=said["id"])["targets"] == []


def test_person_reply_wakes_nobody_new(room: Room) -> None:
    asked = room.say("hana", "@a hi")
    ev = room.say("ivo", "me too", in_reply_to=asked["id"])
    assert "hana" not in ev["targets"]


def test_slash_stop_goes_to_every_live_agent_and_is_no_delegation(room: Room) -> None:
    ev = room.say("hana", "/stop")
    assert sorted(ev["targets"]) == ["a", "b"]
    assert ev["route"] == "stop"
    assert "delegated_to" not in ev["metadata"]


def test_slash_stop_with_a_mention_goes_to_that_agent_only(room: Room) -> None:
    ev = room.say("hana", "/stop @b")
    assert ev["targets"] == ["b"]


def test_cancel_route_posts_a_stop_for_the_named_agent(room: Room) -> None:
    with room.hub.client(room.tokens["ivo"]) as c:
        r = c.post(f"/v1/rooms/{room.id}/cancel", json={"agent": "a"})
        everyone = c.post(f"/v1/rooms/{room.id}/cancel")
    assert r.status_code == 201, r.text
    assert (r.json()["event"]["text"], r.json()["event"]["targets"]) == ("/stop @a", ["a"])
    assert everyone.status_code == 201, everyone.text
    assert sorted(everyone.json()["event"]["targets"]) == ["a", "b"]
    assert r.json()["event"]["id"] in inbox(room.hub, room.tokens["a"])


def test_cancel_route_refuses_non_participants_and_bad_bodies(room: Room) -> None:
    remove(room.hub, "ivo", "room", room)
    with room.hub.client(room.tokens["ivo"]) as c:
        r = c.post(f"/v1/rooms/{room.id}/cancel", json={"agent": "a"})
    assert (r.status_code, r.json()["error"]["code"]) == (403, "channel_membership_required")
    with room.hub.client(room.tokens["hana"]) as c:
        bad = c.post(f"/v1/rooms/{room.id}/cancel", content=b'{"agent": "NOT A NAME"}')
        junk = c.post(f"/v1/rooms/{room.id}/cancel", content=b"{nope")
        extra = c.post(f"/v1/rooms/{room.id}/cancel", json={"who": "a"})
        nowhere = c.post("/v1/rooms/rm_nope/cancel", json={})
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_request")
    assert (junk.status_code, junk.json()["error"]["code"]) == (400, "invalid_json")
    assert extra.json()["error"]["code"] == "invalid_request"
    assert (nowhere.status_code, nowhere.json()["error"]["code"]) == (404, "room_not_found")
    assert [e["text"] for e in room.events("hana")] == []


def test_member_lookup_names_the_owner(room: Room) -> None:
    with room.hub.client(room.tokens["b"]) as c:
        r = c.get("/v1/workspaces/acme/members/a")
        missing = c.get("/v1/workspaces/acme/members/zed")
        other_ws = c.get("/v1/workspaces/elsewhere/members/a")
    assert r.status_code == 200
    assert (r.json()["member"]["owner"], r.json()["member"]["kind"]) == ("hana", "agent")
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "member_not_found")
    assert (other_ws.status_code, other_ws.json()["error"]["code"]) == (404, "no_workspace")
