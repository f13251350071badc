"""One cause per event (docs/delegation.md "Cause", docs/architecture.md#cause): agents that relay
through posts that answer nothing (no `in_reply_to`: a delivery, an MCP `post_message`, a plain
API post) stay in the chain of the person's message that started it, so depth and the
origin's total stop them, with one notice. Agents `a`, `b`, `c`; human `hana`. Both engines,
real hub processes, over HTTP."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from typing import Any

from routing_helpers import Room, inbox

from hubproc import HubProcess, fresh_workspace, make_setup


def room_on(hub: HubProcess, workspace: str | None = None, name: str = "general", **settings: Any) -> Room:
    s = make_setup(hub, ["hana"], ["a", "b", "c"], workspace=workspace or fresh_workspace())
    room = Room(hub, s.tokens, s.room)
    if settings:
        r = room.settings("hana", **settings)
        assert r.status_code == 200, r.text
    return room


def notices(room: Room) -> list[dict[str, Any]]:
    return [e for e in room.events("hana") if e["type"] == "notice"]


def relay(rooms: list[Room], max_rounds: int = 200) -> list[dict[str, Any]]:
    """Agents `a` and `b` answer every wake-up with a plain post that answers nothing (no
    `in_reply_to`), mentioning the other: the loop the cause must bound. With several
    rooms, each hop goes to the next room (a relay across rooms). Returns their posts;
    ends when no agent is woken any more (or fails after `max_rounds`)."""
    other = {"a": "b", "b": "a"}
    seen: dict[str, set[str]] = {"a": set(), "b": set()}
    posts: list[dict[str, Any]] = []
    for _ in range(max_rounds):
        woke = False
        for me in ("a", "b"):
            for ev_id in inbox(rooms[0].hub, rooms[0].tokens[me]):
                if ev_id in seen[me]:
                    continue
                seen[me].add(ev_id)
                woke = True
                room = rooms[len(posts) % len(rooms)]
                posts.append(room.say(me, f"@{other[me]} your turn"))
        if not woke:
            return posts
    raise AssertionError(f"still relaying after {max_rounds} rounds")


def test_a_relay_of_plain_posts_stops_at_the_depth_limit_with_one_notice(
    shared_hub: HubProcess,
) -> None:
    room = room_on(shared_hub)
    start = room.say("hana", "@a start the relay")
    posts = relay([room])
    # Every hop descends from the wake-up before it: one deeper each time, so the ninth
    # wakes no one (before the cause, every hop was depth 1 and the relay never ended).
    assert [p["metadata"].get("delegation_depth") for p in posts] == list(range(1, 10))
    assert posts[-1]["route"] == "depth_limit" and posts[-1]["targets"] == []
    assert {p["cause"]["origin"] for p in posts} == {start["id"]}
    assert {p["cause"]["via"] for p in posts} == {"wake_up"}
    (notice,) = notices(room)
    assert notice["metadata"]["agentpost/notice"] == "depth_limit"
    assert len(room.events("hana")) == 1 + 9 + 1


def test_the_origins_total_stops_a_relay_across_rooms(
    make_hub: Callable[..., HubProcess],
) -> None:
    """Depth out of the way (100): the origin's total (5 here) stops the chain, counted over
    both rooms together, with one notice in the room where it stopped."""
    hub = make_hub("h", env={"AGENTPOST_ORIGIN_WAKEUPS": "5"})
    ws = fresh_workspace()
    one = room_on(hub, workspace=ws, max_delegation_depth=100)
    with hub.client(one.tokens["hana"]) as c:
        r = c.post(
            "/v1/workspaces/" + ws + "/rooms",
            json={"name": "second", "participants": ["a", "b"]},
        )
    assert r.status_code == 201, r.text
    two = Room(hub, one.tokens, r.json()["room"]["id"])
    assert two.settings("hana", max_delegation_depth=100).status_code == 200
    start = one.say("hana", "@a start the relay")
    posts = relay([one, two])
    woke = [p for p in posts if p["targets"]]
    assert len(woke) == 5  # five agent wake-ups caused by hana's one message, in all
    assert posts[-1]["route"] == "origin_limit" and len(posts) == 6
    assert {p["cause"]["origin"] for p in posts} == {start["id"]}
    found = notices(one) + notices(two)
    assert len(found) == 1
    assert found[0]["metadata"]["agentpost/notice"] == "origin_limit"
    assert found[0]["metadata"]["origin"] == start["id"]
    # A new message of a person is a new origin with a total of its own.
    again = one.say("hana", "@a once more")
    assert again["targets"] == ["a"]
    more = one.say("a", "@b and you")
    assert more["targets"] == ["b"] and more["cause"]["origin"] == again["id"]


def test_the_total_holds_across_concurrent_posts_and_hub_processes(
    engine: str | None, make_hub: Callable[..., HubProcess]
) -> None:
    """Many posts of one chain at once, through two hub processes on PostgreSQL: exactly
    the total is admitted, one notice."""
    env = {"AGENTPOST_ORIGIN_WAKEUPS": "7", "AGENTPOST_WAKE_WINDOW_SECONDS": "600"}
    first = make_hub("h1", env=env)
    hubs = [first] if engine is None else [first, make_hub("h2", env=env)]
    room = room_on(first, max_delegation_depth=100, agent_wakeups_per_minute=1000)
    start = room.say("hana", "@a @b @c all of you")
    assert sorted(start["targets"]) == ["a", "b", "c"]

    def post(i: int) -> dict[str, Any]:
        me, target = ["a", "b", "c"][i % 3], ["b", "c", "a"][i % 3]
        with hubs[i % len(hubs)].client(room.tokens[me]) as c:
            # in reply to the person's message: every post is in its chain for certain
            r = c.post(
                f"/v1/rooms/{room.id}/messages",
                json={"text": f"@{target} n{i}", "in_reply_to": start["id"]},
            )
        assert r.status_code == 201, r.text
        event: dict[str, Any] = r.json()["event"]
        return event

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        got = list(pool.map(post, range(24)))
    assert sum(1 for e in got if e["route"] == "mention") == 7
    assert sum(1 for e in got if e["route"] == "origin_limit") == 17
    assert len(notices(room)) == 1


def test_a_worker_names_its_trigger_only_under_its_lease(shared_hub: HubProcess) -> None:
    """`Agentpost-Cause` is taken from a post fenced by the agent's Worker lease and only
    for an event that woke the agent; otherwise the latest wake-up decides."""
    room = room_on(shared_hub)
    first = room.say("hana", "@a first job")
    second = room.say("hana", "@a second job")
    with room.hub.client(room.tokens["a"]) as c:
        lease = c.post(
            "/v1/worker/lease", json={"worker_id": "a" * 32, "host": "h", "pid": 1}
        )
        assert lease.status_code in (200, 201), lease.text
        fence = str(lease.json()["lease"]["fence"])
        fenced = c.post(
            f"/v1/rooms/{room.id}/messages",
            json={"text": "@b for the first job"},
            headers={"Agentpost-Worker-Fence": fence, "Agentpost-Cause": first["id"]},
        )
        assert fenced.status_code == 201, fenced.text
        assert fenced.json()["event"]["cause"] == {"origin": first["id"], "via": "trigger"}
        # Unfenced, the header is not the Worker's word: the latest wake-up decides.
        loose = c.post(
            f"/v1/rooms/{room.id}/messages",
            json={"text": "@b also"},
            headers={"Agentpost-Cause": first["id"]},
        )
        assert loose.json()["event"]["cause"] == {"origin": second["id"], "via": "wake_up"}
        # An event that did not wake this agent is no trigger of its.
        mine = room.say("b", "a note of b's")
        other = c.post(
            f"/v1/rooms/{room.id}/messages",
            json={"text": "@c next"},
            headers={"Agentpost-Worker-Fence": fence, "Agentpost-Cause": mine["id"]},
        )
        assert other.json()["event"]["cause"]["via"] == "wake_up"
        bad = c.post(
            f"/v1/rooms/{room.id}/messages",
            json={"text": "x"},
            headers={"Agentpost-Worker-Fence": fence, "Agentpost-Cause": "not an id!"},
        )
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"
    assert inbox(room.hub, room.tokens["b"])  # b was woken by the fenced post


def a2a_send(room: Room, who: str, agent: str, text: str, cause: str) -> dict[str, Any]:
    """A2A SendMessage to `agent` as `who`, naming the event whose Turn makes the call (as
    `connect --a2a` does): the posted call event."""
    with room.hub.client(room.tokens[who]) as c:
        workspace = c.get("/v1/me").json()["workspace"]["name"]
        r = c.post(
            f"/a2a/{workspace}/{agent}",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": f"m-{cause}",
                        "role": "ROLE_USER",
                        "parts": [{"text": text}],
                        "metadata": {"agentpost/cause": cause},
                    },
                    "configuration": {"returnImmediately": True},
                },
            },
        )
    assert r.status_code == 200 and "result" in r.json(), r.text
    task = r.json()["result"]["task"]
    for e in Room(room.hub, room.tokens, task["contextId"]).events(who):
        if e["id"] == task["id"]:
            return e
    raise AssertionError("the call's event is not in its room")


def test_calls_through_a2a_that_name_their_cause_are_fenced_like_the_agents_own(
    shared_hub: HubProcess,
) -> None:
    """Two Workers whose A2A bridges call each other's agent through this hub as hana
    (`connect --a2a`): every call is posted as hana, but names the Turn it serves, so the
    calls stay in hana's chain, one deeper each time, and stop at the depth limit."""
    room = room_on(shared_hub)
    start = room.say("hana", "@a start")
    trigger, agent, calls = start["id"], "b", []
    for _ in range(12):
        call = a2a_send(room, "hana", agent, "work on it", trigger)
        calls.append(call)
        if not call["targets"]:
            break
        trigger, agent = call["id"], "a" if agent == "b" else "b"
    assert [c["metadata"]["delegation_depth"] for c in calls] == list(range(1, 10))
    assert {c["cause"]["origin"] for c in calls} == {start["id"]}
    assert calls[-1]["route"] == "depth_limit"
    # A cause the caller could not have been woken for is no cause: a plain call.
    plain = a2a_send(room, "hana", "a", "unrelated", "ev_nosuchevent")
    assert plain["cause"] is None and plain["targets"] == ["a"]
