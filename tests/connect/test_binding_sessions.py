"""A binding belongs to the ACP session it was issued in (docs/architecture.md#deferred-delivery,
docs/deliver.md): a collaborator's Turn cannot steer the agent into delivering under the owner's
binding, and a request naming no session is refused. Real Worker, real hub, the trick agent."""

from __future__ import annotations

import json

import pytest

from conftest import AGENTS, Connected, agent_cmd
from hubproc import HubProcess


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


TRICK = AGENTS / "trick_agent.py"


def _ask(c: Connected, who: str, text: str) -> str:
    e = c.say(who, text)
    reply: str = c.wait_reply(e["id"])["text"]
    return reply


def _deliver(c: Connected, who: str, request: dict) -> dict:  # type: ignore[type-arg]
    text = _ask(c, who, "@bot deliver " + json.dumps(request))
    assert text.startswith("{"), text
    return json.loads(text)  # type: ignore[no-any-return]


def test_a_collaborators_turn_cannot_deliver_under_the_owners_binding(
    connected: Connected,
) -> None:
    c = connected
    c.worker(agent_cmd(TRICK), "--collaborator", "carol")
    owners = json.loads(_ask(c, "alice", "@bot binding"))
    carols = json.loads(_ask(c, "carol", "@bot binding"))
    assert owners["binding"] != carols["binding"]
    stolen = {
        "binding": owners["binding"],
        "id": "steered-1",
        "parts": [{"type": "text", "text": "carol made this appear in alice's name"}],
    }
    r = _deliver(c, "carol", stolen)
    assert (r["status"], r["reason"]) == ("final", "rejected")
    assert r["data"]["why"] == "the binding was not issued in this session"
    assert all(e["text"] != stolen["parts"][0]["text"] for e in c.events())  # never posted
    # Carol's own binding, from her own session, echoing her Turn's `turn`, works.
    own = {**stolen, "binding": "$BINDING", "turn": "$TURN", "id": "own-1",
           "parts": [{"type": "text", "text": "ok"}]}
    assert _deliver(c, "carol", own)["status"] == "delivered"


def test_a_delivery_that_names_no_session_is_rejected(connected: Connected) -> None:
    c = connected
    c.worker(agent_cmd(TRICK))
    request = {
        "sessionId": "$NONE",
        "binding": "$BINDING",
        "id": "nosession-1",
        "parts": [{"type": "text", "text": "from nowhere"}],
    }
    r = _deliver(c, "alice", request)
    assert (r["status"], r["reason"]) == ("final", "rejected")
    assert r["data"]["why"] == "the request names no sessionId"
    forged = {**request, "sessionId": "not-a-session", "id": "nosession-2"}
    r2 = _deliver(c, "alice", forged)
    assert (r2["status"], r2["reason"]) == ("final", "rejected")
    assert all(e["text"] != "from nowhere" for e in c.events())  # never posted
