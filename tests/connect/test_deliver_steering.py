"""A delivery belongs to a Turn (docs/architecture.md#deferred-delivery, docs/deliver.md "Whose
work it is"): the threat is an agent that keeps a binding → session map (or a model that
copies both ids from its context) and, in a collaborator's Turn, delivers under the owner's
binding into the owner's private room. Each prompt carries its Turn's `turn`; a request that
echoes it is honoured only for that Turn's binding, after any number of restarts; one that
echoes none only while no one but the binding's sender ever had a Turn with the agent.
Real Worker, real hub, real ACP agents (SDK only)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import AGENTS, Connected, agent_cmd, wait_for
from hubproc import HubProcess, poll


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


STEERED = AGENTS / "steered_agent.py"
TRICK = AGENTS / "trick_agent.py"
NO_TURN_WHY = (
    "the request echoes no turn, and more than one sender has had Turns with this agent: "
    "echo the turn of the Turn this work is for"
)


def new_room(c: Connected, name: str, participants: list[str]) -> str:
    with c.hub.client(c.setup.tokens["alice"]) as h:
        r = h.post(
            f"/v1/workspaces/{c.setup.workspace}/rooms",
            json={"name": name, "participants": participants},
        )
    assert r.status_code == 201, r.text
    return str(r.json()["room"]["id"])


def say(c: Connected, who: str, text: str, room: str | None = None) -> dict[str, Any]:
    with c.hub.client(c.setup.tokens[who]) as h:
        r = h.post(f"/v1/rooms/{room or c.setup.room}/messages", json={"text": text})
    assert r.status_code == 201, r.text
    return r.json()["event"]  # type: ignore[no-any-return]


def events(c: Connected, room: str | None = None) -> list[dict[str, Any]]:
    with c.hub.client(c.setup.tokens["alice"]) as h:  # alice takes part in every room
        r = h.get(f"/v1/rooms/{room or c.setup.room}/events", params={"limit": 1000})
    assert r.status_code == 200, r.text
    return r.json()["events"]  # type: ignore[no-any-return]


def ask(c: Connected, who: str, text: str, room: str | None = None) -> str:
    e = say(c, who, text, room)
    found = poll(
        lambda: [x for x in events(c, e["room"]) if x["in_reply_to"] == e["id"]], timeout=60
    )
    return str(found[0]["text"])


def ask_json(c: Connected, who: str, text: str, room: str | None = None) -> Any:
    said = ask(c, who, text, room)
    assert said.startswith("{"), said
    return json.loads(said)


def texts(c: Connected, text: str, room: str | None = None) -> list[dict[str, Any]]:
    return [e for e in events(c, room) if e["text"] == text]


def test_a_binding_to_session_agent_cannot_deliver_a_collaborators_words_into_the_owners_room(
    connected: Connected,
) -> None:
    """The agent knows both bindings and both sessions. In carol's Turn it delivers under
    every binding it knows, each from the session the binding came with, echoing the `turn`
    of the Turn it works for (carol's): the owner's binding refuses it, nothing reaches
    alice's private room, and carol's own delivery goes through."""
    c = connected
    c.worker(agent_cmd(STEERED), "--collaborator", "carol")
    private = new_room(c, "alice-private", ["bot"])
    owners = ask_json(c, "alice", "@bot turn", private)
    carols = ask_json(c, "carol", "@bot turn")
    assert owners["binding"] != carols["binding"]

    results = ask_json(c, "carol", "@bot everywhere carol was here")
    stolen = results[owners["binding"]]
    assert (stolen["status"], stolen["reason"]) == ("final", "rejected"), stolen
    assert stolen["data"] == {
        "binding": owners["binding"],
        "why": "the turn was issued for another binding",
    }
    assert results[carols["binding"]]["status"] == "delivered", results
    assert texts(c, "carol was here", private) == []
    assert [e["id"] for e in texts(c, "carol was here")] == results[carols["binding"]]["event_ids"]

    # Echoing no turn (the seed's wire) is no way round it: more than one sender has had
    # Turns with this agent, so neither binding takes a request without one.
    bare = ask_json(c, "carol", "@bot everywhere-bare carol again")
    assert {b: (r["reason"], r["data"]["why"]) for b, r in bare.items()} == {
        owners["binding"]: ("rejected", NO_TURN_WHY),
        carols["binding"]: ("rejected", NO_TURN_WHY),
    }
    assert texts(c, "carol again", private) == [] and texts(c, "carol again") == []


def test_work_of_the_owners_turn_still_delivers_when_it_ends_in_a_collaborators_turn(
    connected: Connected,
) -> None:
    """The other side of the same rule: work alice asked for in her private room, echoing
    her Turn's `turn`, is delivered there even when it finishes while carol's Turn runs."""
    c = connected
    c.worker(agent_cmd(STEERED), "--collaborator", "carol")
    private = new_room(c, "alice-private-2", ["bot"])
    owners = ask_json(c, "alice", "@bot turn", private)
    assert ask(c, "alice", "@bot later the chart is ready", private) == "later: noted"
    done = ask_json(c, "carol", "@bot finish")
    assert done[owners["binding"]]["status"] == "delivered", done
    assert len(texts(c, "the chart is ready", private)) == 1
    assert texts(c, "the chart is ready") == []


def test_a_turn_of_another_binding_or_an_unknown_one_is_rejected(c_trick: Connected) -> None:
    """Owner only, two rooms: a request under the side room's binding that echoes the turn
    of the Turn in general is refused, and so is a turn the Worker never issued; with the side
    room's own `turn` (its latest Turn's) the same request delivers."""
    c = c_trick
    side = new_room(c, "side", ["bot"])
    sides = ask_json(c, "alice", "@bot binding", side)
    request = {
        "sessionId": "@SESSION_OF_BINDING",
        "binding": sides["binding"],
        "id": "other-turn",
        "parts": [{"type": "text", "text": "into the side room"}],
    }
    r = ask_json(c, "alice", "@bot deliver " + json.dumps({**request, "turn": "$TURN"}))
    assert (r["status"], r["reason"]) == ("final", "rejected"), r
    assert r["data"] == {"binding": sides["binding"], "why": "the turn was issued for another binding"}
    forged = {**request, "id": "forged-turn", "turn": "0" * 32}
    r2 = ask_json(c, "alice", "@bot deliver " + json.dumps(forged))
    assert (r2["reason"], r2["data"]["why"]) == ("rejected", "unknown turn"), r2
    assert texts(c, "into the side room", side) == []
    own = {**request, "id": "own-turn", "turn": "@TURN_OF_BINDING"}
    r3 = ask_json(c, "alice", "@bot deliver " + json.dumps(own))
    assert r3["status"] == "delivered", r3
    assert [e["id"] for e in texts(c, "into the side room", side)] == r3["event_ids"]


def test_a_deferred_delivery_echoing_its_turn_delivers_once_after_the_worker_is_killed(
    c_trick: Connected,
) -> None:
    """The `turn` is in the ledger (fsync'd before the prompt went out): after SIGKILL and a
    new start — a new agent process, the old session gone — work of that Turn still
    delivers, once, whichever session the request names."""
    c = c_trick
    w = c.workers[0]
    asked = say(c, "alice", "@bot binding")
    first = json.loads(wait_for(lambda: c.replies_to(asked["id"]))[0]["text"])
    old_session_turn = first["turn"]
    w.kill()
    w.start()
    request = {
        "sessionId": "a-session-of-the-agent-process-that-died",
        "binding": first["binding"],
        "turn": old_session_turn,
        "id": "after-the-kill",
        "parts": [{"type": "text", "text": "rendered while the Worker was down"}],
    }
    r = ask_json(c, "alice", "@bot deliver " + json.dumps(request))
    assert r["status"] == "delivered", r
    again = ask_json(c, "alice", "@bot deliver " + json.dumps(request))
    assert again == r  # a resend is answered from the ledger
    assert [e["id"] for e in texts(c, "rendered while the Worker was down")] == r["event_ids"]
    # Its cause is the Turn whose work it is, not the Turn the request came in.
    posted = texts(c, "rendered while the Worker was down")[0]
    assert posted["cause"] == {"origin": asked["id"], "via": "trigger"}, posted["cause"]


def test_without_turn_an_owner_only_agent_delivers_until_a_second_sender_has_a_turn(
    connected: Connected,
) -> None:
    """The seed's wire (no `turn`) keeps working for an agent nobody but its owner talks to,
    deferred work looked up by binding included; once carol has had one Turn it is refused
    (and still after a restart: the ledger remembers), while echoing the turn works."""
    c = connected
    w = c.worker(agent_cmd(TRICK), "--collaborator", "carol")
    assert (
        "delivery (_ag2/deliver): a request without turn is honoured while one sender has had Turns"
        in w.log()
    )
    side = new_room(c, "side-bare", ["bot"])
    sides = ask_json(c, "alice", "@bot binding", side)
    request = {
        "sessionId": "@SESSION_OF_BINDING",  # deferred work of the side room's Turn
        "binding": sides["binding"],
        "id": "bare-1",
        "parts": [{"type": "text", "text": "no turn, one sender"}],
    }
    r = ask_json(c, "alice", "@bot deliver " + json.dumps(request))
    assert r["status"] == "delivered", r

    assert ask(c, "carol", "@bot hello") == "trick: @bot hello"
    wait_for(lambda: "carol had a Turn, so more than one sender has" in w.log())
    late = {**request, "id": "bare-2", "parts": [{"type": "text", "text": "no turn, two senders"}]}
    r2 = ask_json(c, "alice", "@bot deliver " + json.dumps(late))
    assert (r2["status"], r2["reason"]) == ("final", "rejected"), r2
    assert r2["data"] == {"binding": sides["binding"], "why": NO_TURN_WHY}
    assert texts(c, "no turn, two senders", side) == []

    w.stop()
    w.start()
    assert "delivery (_ag2/deliver): a request must echo its Turn's turn (2 senders" in w.log()
    sides_now = ask_json(c, "alice", "@bot binding", side)  # the new agent's side session
    r3 = ask_json(c, "alice", "@bot deliver " + json.dumps({**late, "id": "bare-3"}))
    assert (r3["reason"], r3["data"]["why"]) == ("rejected", NO_TURN_WHY), r3
    echoed = {**late, "id": "echoed", "turn": sides_now["turn"]}
    r4 = ask_json(c, "alice", "@bot deliver " + json.dumps(echoed))
    assert r4["status"] == "delivered", r4
    assert [e["id"] for e in texts(c, "no turn, two senders", side)] == r4["event_ids"]
