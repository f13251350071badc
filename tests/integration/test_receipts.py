"""Delegation receipts (docs/delegation.md): the delegator hears back once, deterministically.
Agents `a` (delegator), `b` (delegate), `c` (third agent); human `hana`."""

from __future__ import annotations

from typing import Any

import pytest
from routing_helpers import Room, inbox, member_id, remove

from hubproc import HubProcess, make_setup


@pytest.fixture
def room(hub: HubProcess) -> Room:
    s = make_setup(hub, ["hana"], ["a", "b", "c"])
    return Room(hub, s.tokens, s.room)


def delegate(room: Room) -> dict[str, Any]:
    e1 = room.say("a", "@b please draft the report")
    assert e1["metadata"] == {
        "delegated_by": "a",
        "delegated_to": ["b"],
        "delegated_to_ids": [member_id(room, "b")],
        "delegation_depth": 1,
    }
    return e1


def reply(
    room: Room, e1: dict[str, Any], kind: str, text: str = "done", who: str = "b"
) -> dict[str, Any]:
    return room.say(who, text, in_reply_to=e1["id"], reply_kind=kind)


@pytest.mark.parametrize("kind", ["result", "error", "cancelled"])
def test_terminal_receipt_wakes_the_delegator_once(room: Room, kind: str) -> None:
    e1 = delegate(room)
    r = reply(room, e1, kind)
    assert (r["targets"], r["route"]) == (["a"], "receipt")
    assert room.event("a", e1["id"])["metadata"]["receipt_from"] == ["b"]
    dup = reply(room, e1, kind, "done again")
    assert (dup["targets"], dup["route"]) == ([], "receipt_duplicate")
    assert inbox(room.hub, room.tokens["a"]) == [r["id"]]


def test_duplicate_receipt_still_honours_onward_mentions(room: Room) -> None:
    e1 = delegate(room)
    reply(room, e1, "result")
    dup = reply(room, e1, "result", "again, and @c take a look")
    assert (dup["targets"], dup["route"]) == (["c"], "receipt_duplicate")
    assert dup["metadata"] == {
        "delegated_by": "b",
        "delegated_to": ["c"],
        "delegated_to_ids": [member_id(room, "c")],
        "delegation_depth": 2,
    }


def test_mentioning_the_delegator_is_still_a_plain_receipt(room: Room) -> None:
    e1 = delegate(room)
    r = reply(room, e1, "result", "@a here it is")
    assert (r["targets"], r["route"]) == (["a"], "receipt")
    assert r["metadata"] == {"delegation_depth": 1}


def test_mentioning_a_third_agent_routes_to_both_and_marks_onward(room: Room) -> None:
    e1 = delegate(room)
    r = reply(room, e1, "result", "done; @c please review")
    assert (r["targets"], r["route"]) == (["a", "c"], "receipt")
    assert r["metadata"] == {
        "delegated_by": "b",
        "delegated_to": ["c"],
        "delegated_to_ids": [member_id(room, "c")],
        "delegation_depth": 2,
    }
    back = room.say("c", "looks fine", in_reply_to=r["id"], reply_kind="result")
    assert (back["targets"], back["route"]) == (["b"], "receipt")


def test_needs_input_wakes_at_most_three_times_and_keeps_the_terminal_slot(room: Room) -> None:
    e1 = delegate(room)
    asks = [reply(room, e1, "needs_input", f"question {i}") for i in range(4)]
    assert [a["targets"] for a in asks] == [["a"], ["a"], ["a"], []]
    assert asks[3]["route"] == "needs_input_limit"
    assert room.event("a", e1["id"])["metadata"]["needs_input_from"] == {"b": 3}
    final = reply(room, e1, "result")
    assert (final["targets"], final["route"]) == (["a"], "receipt")
    assert len(inbox(room.hub, room.tokens["a"])) == 4


def test_reply_to_a_receipt_does_not_bounce_back(room: Room) -> None:
    e1 = delegate(room)
    r = reply(room, e1, "result")
    thanks = room.say("a", "thanks, merging", in_reply_to=r["id"])
    assert (thanks["targets"], thanks["route"]) == ([], "no_mention")
    ack = room.say("a", "ok", in_reply_to=r["id"], reply_kind="result")
    assert ack["targets"] == []  # r is no delegation: a's "receipt" to it is a plain message
    assert inbox(room.hub, room.tokens["b"]) == [e1["id"]]


# -- forged or misdirected receipts: plain messages, no one woken ------------------------


def test_receipt_to_an_event_in_another_room_is_refused(room: Room) -> None:
    with room.hub.client(room.tokens["hana"]) as h:
        other = h.post(
            "/v1/workspaces/acme/rooms", json={"name": "other", "participants": ["a", "b"]}
        )
    other_room = Room(room.hub, room.tokens, other.json()["room"]["id"])
    e1 = other_room.say("a", "@b over here")
    before = room.events("hana")
    r = room.post("b", "done", in_reply_to=e1["id"], reply_kind="result")
    assert r.status_code == 400, r.text
    assert (r.json()["error"]["code"], r.json()["error"]["field"]) == (
        "invalid_request",
        "$.in_reply_to",
    )
    assert room.events("hana") == before
    assert inbox(room.hub, room.tokens["a"]) == []


def test_receipt_to_an_unmarked_event_is_a_plain_message(room: Room) -> None:
    plain = room.say("hana", "@b do it")  # a human's mention is no delegation
    r = reply(room, plain, "result")
    # No receipt; but a person who asks is told (docs/architecture.md#receipts): the reply wakes
    # hana, not as a receipt.
    assert (r["targets"], r["route"]) == (["hana"], "answer")
    assert "receipt_from" not in room.event("hana", plain["id"])["metadata"]


@pytest.mark.parametrize(
    "missing",
    ["ev_01M8RKJCJGYAXAPFFFJ3BAHR5M", "ev_01NOTHERE000000000000000", "md_x", "", "ev_" + "U" * 26],
    ids=["unknown", "short", "other-prefix", "empty", "not-crockford"],
)
@pytest.mark.parametrize("kind", ["result", None])
def test_reply_to_a_missing_event_is_refused_never_posted(
    room: Room, missing: str, kind: str | None
) -> None:
    """Never answered "ok": a receipt (or any reply) to no event is a 400 (docs/delegation.md)."""
    before = room.events("hana")
    body = {"in_reply_to": missing, **({"reply_kind": kind} if kind else {})}
    r = room.post("b", "done", **body)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_request", "$.in_reply_to")
    assert room.events("hana") == before


def test_receipt_from_a_replier_not_delegated_to_is_a_plain_message(room: Room) -> None:
    e1 = delegate(room)
    r = reply(room, e1, "result", who="c")
    assert (r["targets"], r["route"]) == ([], "no_mention")
    assert "receipt_from" not in room.event("a", e1["id"])["metadata"]


def test_forged_delegation_metadata_makes_no_receipt_path(room: Room) -> None:
    forged = {
        "delegated_by": "c",
        "delegated_to": ["b"],
        "delegated_to_ids": [member_id(room, "b")],
    }
    fake = room.say("c", "not a delegation", metadata=forged)
    assert fake["metadata"] == {}
    r = reply(room, fake, "result")
    assert r["targets"] == []


def test_reply_kind_outside_the_four_is_refused(room: Room) -> None:
    e1 = delegate(room)
    bad = room.post("b", "done", in_reply_to=e1["id"], reply_kind="completed")
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_request")
    assert len(room.events("hana")) == 1


@pytest.mark.parametrize("how", ["soft", "hard", "room"])
def test_receipt_from_a_removed_replier_is_refused(room: Room, how: str) -> None:
    e1 = delegate(room)
    remove(room.hub, "b", how, room)
    r = room.post("b", "done @c", in_reply_to=e1["id"], reply_kind="result")
    expected = "channel_membership_required" if how == "room" else "agent_removed"
    assert (r.status_code, r.json()["error"]["code"]) == (403, expected)
    assert len(room.events("hana")) == 1
    assert inbox(room.hub, room.tokens["c"]) == []


@pytest.mark.parametrize("how", ["soft", "hard", "room"])
def test_receipt_to_a_removed_delegator_is_suppressed_onward_still_routes(
    room: Room, how: str
) -> None:
    e1 = delegate(room)
    remove(room.hub, "a", how, room)
    r = reply(room, e1, "result")
    assert (r["targets"], r["route"]) == ([], "receipt_undeliverable")
    onward = reply(room, e1, "result", "@c please take over")
    assert (onward["targets"], onward["route"]) == (["c"], "receipt_undeliverable")
    assert onward["metadata"] == {
        "delegated_by": "b",
        "delegated_to": ["c"],
        "delegated_to_ids": [member_id(room, "c")],
        "delegation_depth": 2,
    }


@pytest.mark.parametrize("how", ["soft", "hard", "room"])
def test_master_removed_star_routes_no_receipt_to_it(room: Room, how: str) -> None:
    room.settings("hana", mode="master", master="a")
    e1 = room.say("a", "@b go")
    assert e1["metadata"] == {
        "delegated_by": "a",
        "delegated_to": ["b"],
        "delegated_to_ids": [member_id(room, "b")],
        "delegation_depth": 1,
    }
    remove(room.hub, "a", how, room)
    r = reply(room, e1, "result", "done @c")  # sub-agent: onward mentions ignored in a star
    assert (r["targets"], r["route"]) == ([], "receipt_undeliverable")


def test_receipt_in_master_mode_goes_to_the_delegating_master(room: Room) -> None:
    room.settings("hana", mode="master", master="a")
    e1 = room.say("a", "@b go")
    r = reply(room, e1, "result", "done, @c fyi")
    assert (r["targets"], r["route"]) == (["a"], "receipt")
    assert r["metadata"] == {"delegation_depth": 1}
