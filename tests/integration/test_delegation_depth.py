"""Depth and budget (docs/delegation.md, docs/architecture.md#depth-and-budget): whatever agents
write, one human message causes a bounded amount of traffic. Agents `a`, `b`, `c`; human `hana`.
Every test runs on both engines, over HTTP, against a real hub process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from routing_helpers import Room, inbox, member_id

from hubproc import HubProcess, Setup, fresh_workspace, make_setup, poll


def room_on(hub: HubProcess, **settings: Any) -> Room:
    s = make_setup(hub, ["hana"], ["a", "b", "c"], workspace=fresh_workspace())
    room = Room(hub, s.tokens, s.room)
    if settings:
        r = room.settings("hana", **settings)
        assert r.status_code == 200, r.text
    return room


@pytest.fixture
def room(shared_hub: HubProcess) -> Room:
    return room_on(shared_hub)


def notices(room: Room) -> list[dict[str, Any]]:
    return [e for e in room.events("hana") if e["type"] == "notice"]


def keyed(room: Room, who: str, key: str, body: dict[str, Any]) -> httpx.Response:
    with room.hub.client(room.tokens[who]) as c:
        return c.post(f"/v1/rooms/{room.id}/messages", json=body, headers={"Idempotency-Key": key})


# -- depth along a chain ------------------------------------------------------------------


def test_depth_along_a_chain(room: Room) -> None:
    ask = room.say("hana", "@a please get this reviewed")
    assert "delegation_depth" not in ask["metadata"]  # a person's message starts at 0
    e1 = room.say("a", "@b please review", in_reply_to=ask["id"])
    assert e1["metadata"]["delegation_depth"] == 1
    assert e1["targets"] == ["b", "hana"]  # the delegation, and hana is told
    r1 = room.say("b", "done; @c please double-check", in_reply_to=e1["id"], reply_kind="result")
    assert r1["targets"] == ["a", "c"]
    assert r1["metadata"] == {
        "delegated_by": "b",
        "delegated_to": ["c"],
        "delegated_to_ids": [member_id(room, "c")],
        "delegation_depth": 2,
    }
    r2 = room.say("c", "checked", in_reply_to=r1["id"], reply_kind="result")
    assert (r2["targets"], r2["metadata"]) == (["b"], {"delegation_depth": 2})  # a receipt
    # An agent woken by a receipt that delegates again goes one deeper than that receipt.
    e3 = room.say("b", "@a one more thing", in_reply_to=r2["id"])
    assert (e3["route"], e3["metadata"]["delegation_depth"]) == ("mention", 3)
    # A delegation that answers nothing descends from what last woke its agent (its cause,
    # docs/delegation.md "Cause"): c was last woken by r1, so one deeper than r1, and it
    # stays in hana's chain.
    fresh = room.say("c", "@a unrelated")
    assert fresh["metadata"]["delegation_depth"] == 3
    assert fresh["cause"] == {"origin": ask["id"], "via": "wake_up"}
    assert e1["cause"] == {"origin": ask["id"], "via": "in_reply_to"}
    # An agent that was never woken starts a chain of its own: its event is its origin.
    other = room_on(room.hub)  # another workspace, whose agents were never woken
    start = other.say("a", "@b a thought of my own")
    assert start["metadata"]["delegation_depth"] == 1
    assert start["cause"] == {"origin": start["id"], "via": "start"}
    assert ask["cause"] is None  # a person's message is an origin itself
    # A message that wakes no one carries no depth.
    quiet = room.say("a", "noted", in_reply_to=e3["id"])
    assert quiet["route"] == "no_mention" and "delegation_depth" not in quiet["metadata"]


def test_client_sent_depth_is_stripped_and_never_inherited(room: Room) -> None:
    forged = room.say("a", "no mention", metadata={"delegation_depth": 1, "ticket": 7})
    assert forged["metadata"] == {"ticket": 7}
    deep = room.say("hana", "@a go", metadata={"delegation_depth": 50})
    assert deep["metadata"] == {}
    e1 = room.say("a", "@b go", in_reply_to=deep["id"], metadata={"delegation_depth": 0})
    assert e1["metadata"]["delegation_depth"] == 1


# -- the bounce of two quoting agents -------------------------------------------------------


def bounce(room: Room, start: dict[str, Any], max_rounds: int = 200) -> list[dict[str, Any]]:
    """Agents a and b answer every wake-up as a Worker would: `in_reply_to` the event that
    woke them, `reply_kind` result, quoting the other's mention. Returns their replies;
    ends when no agent has anything left to answer (or fails after `max_rounds`)."""
    other = {"a": "b", "b": "a"}
    seen: dict[str, set[str]] = {"a": set(), "b": set()}
    replies: list[dict[str, Any]] = []
    for _ in range(max_rounds):
        woke = False
        for me in ("a", "b"):
            for ev_id in inbox(room.hub, room.tokens[me]):
                if ev_id in seen[me]:
                    continue
                seen[me].add(ev_id)
                woke = True
                replies.append(
                    room.say(
                        me,
                        f"@{other[me]} over to you",
                        in_reply_to=ev_id,
                        reply_kind="result",
                    )
                )
        if not woke:
            return replies
    raise AssertionError(f"still bouncing after {max_rounds} rounds")


def test_two_quoting_agents_stop_at_the_depth_limit(room: Room) -> None:
    start = room.say("hana", "@a ask b about the build")
    replies = bounce(room, start)
    # a delegates at depths 1..8, b answers each with a receipt; a's 9th wakes no one.
    assert len(replies) == 17
    last = replies[-1]
    assert (last["sender"], last["route"], last["targets"]) == ("a", "depth_limit", [])
    assert last["metadata"] == {"delegation_depth": 9}
    depths = [r["metadata"]["delegation_depth"] for r in replies]
    assert depths == [d for d in range(1, 9) for _ in (0, 1)] + [9]
    stored = room.events("hana")
    assert len(stored) == 1 + 17 + 1  # hana's message, the replies, one notice
    (notice,) = notices(room)
    assert notice["sender_kind"] == "system" and notice["targets"] == []
    assert notice["in_reply_to"] == last["id"] and notice["seq"] == last["seq"] + 1
    assert notice["metadata"]["agentpost/notice"] == "depth_limit"
    assert "depth 9" in notice["text"] and "allows 8" in notice["text"]
    assert room.event("hana", last["id"])["route"] == "depth_limit"
    with room.hub.client(room.tokens["a"]) as c:
        state = c.get(f"/v1/events/{last['id']}/delivery").json()["delivery"]
    assert state["targets"] == [] and state["receipts"] is None


def test_a_smaller_limit_stops_sooner_and_a_new_chain_gets_its_own_notice(
    shared_hub: HubProcess,
) -> None:
    room = room_on(shared_hub, max_delegation_depth=2)
    replies = bounce(room, room.say("hana", "@a ask b"))
    assert [r["metadata"]["delegation_depth"] for r in replies] == [1, 1, 2, 2, 3]
    assert replies[-1]["route"] == "depth_limit"
    assert len(notices(room)) == 1
    bounce(room, room.say("hana", "@a once more"))
    assert len(notices(room)) == 2


def test_a_retried_post_at_the_limit_gives_one_notice(shared_hub: HubProcess) -> None:
    room = room_on(shared_hub, max_delegation_depth=1)
    e1 = room.say("a", "@b go")
    r1 = room.say("b", "@a done", in_reply_to=e1["id"], reply_kind="result")
    assert (r1["route"], r1["metadata"]) == ("receipt", {"delegation_depth": 1})
    body = {"text": "@b again", "in_reply_to": r1["id"]}
    first = keyed(room, "a", "k-limit", body)
    again = keyed(room, "a", "k-limit", body)
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    assert first.json()["event"]["route"] == "depth_limit"
    assert len(notices(room)) == 1
    # Another message of the same chain past the limit: stopped, no second notice.
    other = room.say("a", "@b and again", in_reply_to=r1["id"])
    assert other["route"] == "depth_limit"
    assert len(notices(room)) == 1
    assert inbox(room.hub, room.tokens["b"]) == [e1["id"]]


def test_past_the_limit_the_receipt_still_reaches_the_delegator(shared_hub: HubProcess) -> None:
    room = room_on(shared_hub, max_delegation_depth=1)
    e1 = room.say("a", "@b go")
    r = room.say("b", "done, @c take it further", in_reply_to=e1["id"], reply_kind="result")
    assert (r["route"], r["targets"]) == ("depth_limit", ["a"])
    assert r["metadata"] == {"delegation_depth": 2}
    assert inbox(room.hub, room.tokens["c"]) == []
    assert room.event("a", e1["id"])["metadata"]["receipt_from"] == ["b"]


# -- room settings -------------------------------------------------------------------------


def test_room_settings_have_defaults_and_change(room: Room) -> None:
    with room.hub.client(room.tokens["hana"]) as c:
        got = c.get(f"/v1/rooms/{room.id}").json()["room"]
    assert (got["max_delegation_depth"], got["agent_wakeups_per_minute"]) == (8, 120)
    r = room.settings("hana", max_delegation_depth=3, agent_wakeups_per_minute=40)
    assert r.status_code == 200
    changed = r.json()["room"]
    assert (changed["max_delegation_depth"], changed["agent_wakeups_per_minute"]) == (3, 40)
    assert room.settings("hana", router="none").json()["room"]["max_delegation_depth"] == 3


@pytest.mark.parametrize("field", ["max_delegation_depth", "agent_wakeups_per_minute"])
@pytest.mark.parametrize("value", [0, -1, "8", 10**6, 2**70, True, 1.5, None])
def test_a_bad_setting_is_refused_and_changes_nothing(
    shared_setup: Setup, field: str, value: Any
) -> None:
    hub, tok = shared_setup.hub, shared_setup.tokens["alice"]
    with hub.client(tok) as c:
        before = c.get(f"/v1/rooms/{shared_setup.room}").json()["room"]
        r = c.patch(f"/v1/rooms/{shared_setup.room}", json={field: value, "router": "none"})
        if value is None:  # null in a PATCH means "leave it"
            assert r.status_code == 200
            assert r.json()["room"][field] == before[field]
            return
        assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_request"), r.text
        assert c.get(f"/v1/rooms/{shared_setup.room}").json()["room"] == before
        made = c.post(
            f"/v1/workspaces/{shared_setup.workspace}/rooms", json={"name": "other", field: value}
        )
        assert (made.status_code, made.json()["error"]["code"]) == (400, "invalid_request")
        names = [
            x["name"]
            for x in c.get(f"/v1/workspaces/{shared_setup.workspace}/rooms").json()["rooms"]
        ]
    assert "other" not in names


def test_settings_at_room_creation(shared_setup: Setup) -> None:
    with shared_setup.hub.client(shared_setup.tokens["alice"]) as c:
        r = c.post(
            f"/v1/workspaces/{shared_setup.workspace}/rooms",
            json={"name": "tight", "max_delegation_depth": 1, "agent_wakeups_per_minute": 5},
        )
    assert r.status_code == 201, r.text
    room = r.json()["room"]
    assert (room["max_delegation_depth"], room["agent_wakeups_per_minute"]) == (1, 5)


# -- the wake budget -----------------------------------------------------------------------


@pytest.fixture
def short_window_hub(make_hub: Callable[..., HubProcess]) -> HubProcess:
    return make_hub(env={"AGENTPOST_WAKE_WINDOW_SECONDS": "4"})


def test_the_wake_budget_fences_mentions_once_spent_until_the_next_window(
    short_window_hub: HubProcess,
) -> None:
    room = room_on(short_window_hub, agent_wakeups_per_minute=3)
    pending = room.say("a", "@c hold this for later")  # 1 wake-up; c answers it below
    for attempt in range(3):  # a window that turns mid-way is tried again
        posted = [room.say("a", f"@b ping {attempt}.{i}") for i in range(4)]
        routes = [p["route"] for p in posted]
        if routes.count("wake_budget") >= 2 or attempt == 2:
            break
    assert routes[-2:] == ["wake_budget", "wake_budget"], routes
    fenced = posted[-1]
    assert fenced["targets"] == [] and "delegated_to" not in fenced["metadata"]
    assert fenced["metadata"]["delegation_depth"] == 1
    window = [n for n in notices(room) if n["metadata"]["agentpost/notice"] == "wake_budget"]
    assert len(window) == 1 and window[0]["targets"] == []
    assert window[0]["metadata"]["agent_wakeups_per_minute"] == 3
    # A receipt is never withheld: it answers work already asked for.
    receipt = room.say("c", "here", in_reply_to=pending["id"], reply_kind="result")
    assert (receipt["route"], receipt["targets"]) == ("receipt", ["a"])

    def next_window_wakes() -> dict[str, Any] | None:
        ev = room.say("a", "@b are you there")
        return ev if ev["route"] == "mention" else None

    woke = poll(next_window_wakes, timeout=20.0, interval=0.25)
    assert woke["targets"] == ["b"]
    assert woke["id"] in inbox(room.hub, room.tokens["b"])
    starts = [n["metadata"]["window_start_ms"] for n in notices(room)]
    assert len(starts) == len(set(starts))  # at most one notice per window


def test_the_budget_holds_across_concurrent_posts(
    engine: str | None, make_hub: Callable[..., HubProcess]
) -> None:
    """Several hub processes on one PostgreSQL database (one hub on SQLite: one per data
    dir) spend one budget: exactly `budget` wake-ups, one notice."""
    import concurrent.futures

    # Each post descends from its sender's latest wake-up (docs/delegation.md "Cause"), so
    # the 30 posts are one deepening chain: depth and origin limits set out of the way.
    env = {"AGENTPOST_WAKE_WINDOW_SECONDS": "600", "AGENTPOST_ORIGIN_WAKEUPS": "1000"}
    first = make_hub("h1", env=env)
    hubs = [first] if engine is None else [first, make_hub("h2", env=env)]
    room = room_on(first, agent_wakeups_per_minute=10, max_delegation_depth=100)
    senders = ["a", "b", "c"]

    def post(i: int) -> dict[str, Any]:
        me = senders[i % 3]
        target = senders[(i + 1) % 3]
        hub = hubs[i % len(hubs)]
        with hub.client(room.tokens[me]) as c:
            r = c.post(f"/v1/rooms/{room.id}/messages", json={"text": f"@{target} n{i}"})
        assert r.status_code == 201, r.text
        event: dict[str, Any] = r.json()["event"]
        return event

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        got = list(pool.map(post, range(30)))
    woke = [e for e in got if e["targets"]]
    assert len(woke) == 10
    assert sum(e["route"] == "wake_budget" for e in got) == 20
    assert len(notices(room)) == 1
