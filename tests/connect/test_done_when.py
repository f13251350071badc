"""Issue "connect" done-when, with the example agent: a person mentions it and gets one
reply in their inbox; agent A delegating to it gets one `result` receipt."""

from __future__ import annotations

import pytest

from conftest import Connected, wait_for
from hubproc import HubProcess


# One hub per engine for this module: its tests never stop the hub or set its flags, and
# each gets a workspace of its own (`connected`).
@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


def test_person_mentioning_the_agent_gets_one_reply_in_their_inbox(connected: Connected) -> None:
    connected.worker()
    asked = connected.say("alice", "@bot hello there")
    reply = connected.wait_reply(asked["id"])
    assert reply["sender"] == "bot"
    assert reply["text"] == "echo: @bot hello there"
    assert reply["reply_kind"] is None
    assert reply["targets"] == ["alice"]
    assert [e["id"] for e in connected.inbox("alice")] == [reply["id"]]
    wait_for(lambda: connected.acked("bot") >= 1)
    assert len(connected.replies_to(asked["id"])) == 1


def test_agent_delegating_gets_one_result_receipt(connected: Connected) -> None:
    connected.worker()
    e1 = connected.say("helper", "@bot please summarise")
    assert e1["metadata"]["delegated_to"] == ["bot"]
    reply = connected.wait_reply(e1["id"])
    assert reply["reply_kind"] == "result"
    assert reply["targets"] == ["helper"]
    assert [e["id"] for e in connected.inbox("helper")] == [reply["id"]]
