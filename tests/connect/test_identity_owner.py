"""The Worker tells its owner by member id (docs/architecture.md#identity, docs/connect.md "Who
gets a Turn"): after a hard removal frees the owner's name, a person who takes it gets no
owner Turn; the owner an admin names then does, without a restart of the Worker."""

from __future__ import annotations

import pytest

from conftest import Connected, wait_for
from hubproc import HubProcess


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


def _free_and_take(connected: Connected, name: str) -> None:
    ws = connected.setup.workspace
    with connected.hub.client(connected.hub.admin_token) as a:
        r = a.delete(f"/v1/admin/workspaces/{ws}/members/{name}", params={"hard": "true"})
        assert r.status_code == 200, r.text
        r = a.post(f"/v1/admin/workspaces/{ws}/members", json={"name": name, "kind": "human"})
        assert r.status_code == 201, r.text
    connected.setup.tokens[name] = r.json()["token"]
    with connected.hub.client(connected.setup.tokens["carol"]) as c:
        assert c.put(f"/v1/rooms/{connected.setup.room}/participants/{name}").status_code == 200


def test_a_freed_owner_name_gets_no_owner_turn(connected: Connected) -> None:
    w = connected.worker()
    _free_and_take(connected, "alice")
    e1 = connected.say("alice", "@bot hi, I am your owner now")
    reply = connected.wait_reply(e1["id"])
    assert reply["metadata"].get("agentpost/notice") == "not_admitted", reply
    assert not reply["text"].startswith("echo:")
    wait_for(lambda: "no Turn for alice" in w.log())


def test_the_owner_the_admin_names_gets_owner_turns(connected: Connected) -> None:
    connected.worker()
    _free_and_take(connected, "alice")
    with connected.hub.client(connected.hub.admin_token) as a:
        r = a.put(
            f"/v1/admin/workspaces/{connected.setup.workspace}/members/bot/owner",
            json={"owner": "alice"},
        )
        assert r.status_code == 200, r.text
    e1 = connected.say("alice", "@bot hi")
    assert connected.wait_reply(e1["id"])["text"] == "echo: @bot hi"
