"""Routing (docs/delegation.md): gates, mentions, modes, router policies, sensitive filter.
Each test names the case and asserts who is woken (`targets`, inboxes) and what is stored."""

from __future__ import annotations

import pytest
from routing_helpers import Room, inbox, member_id, remove

from hubproc import HubProcess, make_setup


@pytest.fixture
def room(hub: HubProcess) -> Room:
    """Workspace acme: human `hana`, agents `a`, `b`, `c`; room `general` with all four."""
    s = make_setup(hub, ["hana"], ["a", "b", "c"])
    return Room(hub, s.tokens, s.room)


# -- sender gate -------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["soft", "hard"])
def test_removed_agent_is_refused_for_every_event_type(room: Room, how: str) -> None:
    remove(room.hub, "b", how)
    r = room.post("b", "still here @a")
    assert (r.status_code, r.json()["error"]["code"]) == (403, "agent_removed")
    with room.hub.client(room.tokens["b"]) as c:
        up = c.post(f"/v1/rooms/{room.id}/media", files={"file": ("x.txt", b"x")})
    assert (up.status_code, up.json()["error"]["code"]) == (403, "agent_removed")
    assert room.events("hana") == []
    assert inbox(room.hub, room.tokens["a"]) == []


def test_agent_outside_the_room_is_refused_and_nothing_is_stored(room: Room) -> None:
    remove(room.hub, "b", "room", room)
    r = room.post("b", "@a hello")
    assert (r.status_code, r.json()["error"]["code"]) == (403, "channel_membership_required")
    with room.hub.client(room.tokens["b"]) as c:
        up = c.post(f"/v1/rooms/{room.id}/media", files={"file": ("x.txt", b"x")})
    assert up.json()["error"]["code"] == "channel_membership_required"
    assert room.events("hana") == [] and inbox(room.hub, room.tokens["a"]) == []


def test_server_owned_metadata_is_stripped_on_ingress(room: Room) -> None:
    forged = {
        "delegated_by": "hana",
        "delegated_to": ["a"],
        "delegated_to_ids": [member_id(room, "a")],
        "receipt_from": ["a"],
        "needs_input_from": {"a": 1},
        "delegation_depth": 99,
        "ticket": 7,
    }
    ev = room.say("b", "no mention here", metadata=forged)
    assert ev["metadata"] == {"ticket": 7}
    assert ev["targets"] == [] and ev["route"] == "no_mention"


# -- mentions and dynamic mode -----------------------------------------------------------


def test_agent_mention_of_agents_is_a_marked_delegation(room: Room) -> None:
    ev = room.say("a", "@b and @c please check, cc @hana")
    assert ev["targets"] == ["b", "c", "hana"] and ev["route"] == "mention"
    assert ev["metadata"] == {
        "delegated_by": "a",
        "delegated_to": ["b", "c"],
        "delegated_to_ids": [member_id(room, "b"), member_id(room, "c")],
        "delegation_depth": 1,
    }
    assert inbox(room.hub, room.tokens["b"]) == [ev["id"]]


def test_human_mention_wakes_but_marks_no_delegation(room: Room) -> None:
    ev = room.say("hana", "@b look at this")
    assert ev["targets"] == ["b"] and ev["metadata"] == {}


def test_agent_message_with_no_mention_wakes_no_one(room: Room) -> None:
    ev = room.say("a", "thinking out loud")
    assert (ev["targets"], ev["route"]) == ([], "no_mention")


def test_removed_name_is_no_candidate(room: Room) -> None:
    remove(room.hub, "c", "soft")
    ev = room.say("a", "@c are you there?")
    assert ev["targets"] == [] and ev["metadata"] == {}


def test_agent_mention_of_a_non_participant_is_dropped(room: Room) -> None:
    remove(room.hub, "c", "room", room)
    ev = room.say("a", "@c join us")
    assert (ev["targets"], ev["route"]) == ([], "not_participant")
    assert inbox(room.hub, room.tokens["c"]) == []


def test_agent_a_human_targets_is_added_to_the_room(room: Room) -> None:
    remove(room.hub, "c", "room", room)
    ev = room.say("hana", "@c please join")
    assert ev["targets"] == ["c"]
    with room.hub.client(room.tokens["hana"]) as h:
        assert "c" in h.get(f"/v1/rooms/{room.id}").json()["room"]["participants"]
    assert inbox(room.hub, room.tokens["c"]) == [ev["id"]]


# -- router policies -------------------------------------------------------------------


def test_sole_agent_router_wakes_the_only_agent(hub: HubProcess) -> None:
    s = make_setup(hub, ["hana"], ["solo"])
    r = Room(hub, s.tokens, s.room)
    ev = r.say("hana", "anyone?")
    assert (ev["targets"], ev["route"]) == (["solo"], "sole_agent")


def test_sole_agent_router_with_several_agents_wakes_no_one(room: Room) -> None:
    ev = room.say("hana", "anyone?")
    assert (ev["targets"], ev["route"]) == ([], "no_sole_agent")


def test_router_none_wakes_no_one(hub: HubProcess) -> None:
    s = make_setup(hub, ["hana"], ["solo"])
    r = Room(hub, s.tokens, s.room)
    assert r.settings("hana", router="none").json()["room"]["router"] == "none"
    ev = r.say("hana", "anyone?")
    assert (ev["targets"], ev["route"]) == ([], "router_none")


# -- master mode -------------------------------------------------------------------------


def test_master_mode_is_a_star(room: Room) -> None:
    assert room.settings("hana", mode="master", master="a").json()["room"]["mode"] == "master"
    human = room.say("hana", "@b do it")  # humans talk to the master
    assert (human["targets"], human["route"]) == (["a"], "master")
    sub = room.say("b", "@c you do it")  # a sub-agent's onward mentions are ignored
    assert (sub["targets"], sub["route"]) == (["a"], "master")
    master = room.say("a", "@b please")  # the master delegates by mention
    assert master["targets"] == ["b"]
    assert master["metadata"] == {
        "delegated_by": "a",
        "delegated_to": ["b"],
        "delegated_to_ids": [member_id(room, "b")],
        "delegation_depth": 1,
    }


@pytest.mark.parametrize("how", ["soft", "hard", "room"])
def test_gone_master_falls_back_to_live_agents(room: Room, how: str) -> None:
    room.settings("hana", mode="master", master="a")
    remove(room.hub, "a", how, room)
    ev = room.say("hana", "who is here?")
    assert (ev["targets"], ev["route"]) == (["b", "c"], "master_fallback")
    sub = room.say("b", "report")
    assert (sub["targets"], sub["route"]) == ([], "master_unavailable")


def test_only_a_human_participant_changes_routing(room: Room) -> None:
    r = room.settings("a", mode="master", master="a")
    assert (r.status_code, r.json()["error"]["code"]) == (403, "forbidden")
    bad = room.settings("hana", mode="master")
    assert bad.json()["error"]["code"] == "invalid_request"
    bad = room.settings("hana", mode="master", master="hana")
    assert bad.json()["error"]["code"] == "invalid_request"
    bad = room.settings("hana", router="magic")
    assert bad.json()["error"]["code"] == "invalid_request"
    with room.hub.client(room.tokens["hana"]) as h:
        assert h.get(f"/v1/rooms/{room.id}").json()["room"]["mode"] == "dynamic"


# -- the sensitive-data filter ---------------------------------------------------------

SECRET = "here is the key AKIAABCDEFGHIJKLMNOP for prod"


def test_sensitive_filter_is_off_by_default(room: Room) -> None:
    assert room.post("hana", SECRET).status_code == 201


def test_sensitive_filter_refuses_and_spends_the_key(room: Room) -> None:
    room.settings("hana", sensitive_filter=True)
    with room.hub.client(room.tokens["hana"]) as h:
        first = h.post(
            f"/v1/rooms/{room.id}/messages",
            json={"text": SECRET},
            headers={"Idempotency-Key": "s1"},
        )
        again = h.post(
            f"/v1/rooms/{room.id}/messages",
            json={"text": SECRET},
            headers={"Idempotency-Key": "s1"},
        )
        key = "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----"
        up = h.post(f"/v1/rooms/{room.id}/media", files={"file": ("k", b"x")}, data={"text": key})
    assert first.status_code == 422
    assert first.json()["error"]["code"] == "command_rejected"
    assert first.json()["error"]["reason"] == "sensitive_data"
    assert again.headers["idempotency-status"] == "replayed" and again.content == first.content
    assert up.json()["error"]["reason"] == "sensitive_data"
    assert room.events("hana") == []
    assert room.post("hana", "a harmless line").status_code == 201


def test_llm_router_without_an_endpoint_is_refused(room: Room) -> None:
    """No AGENTPOST_ROUTER_URL: choosing the `llm` router is refused (it would wake no one),
    and the room routes as before."""
    r = room.settings("hana", router="llm")
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert (err["code"], err["field"]) == ("invalid_request", "$.router")
    assert "AGENTPOST_ROUTER_URL" in err["message"]
    assert room.settings("hana").json()["room"]["router"] == "sole-agent"
