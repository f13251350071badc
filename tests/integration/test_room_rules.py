"""Refusals a newcomer reads: name rules in words, the llm router refused on a hub with no
model endpoint, and a room back in dynamic mode shows no master."""

from __future__ import annotations

from clirun import agentpost, json_error
from hubproc import HubProcess, Setup


def test_name_rules_are_said_in_words(hub: HubProcess) -> None:
    with hub.client(hub.admin_token) as admin:
        r = admin.post("/v1/admin/workspaces", json={"name": "Acme Corp"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert (err["code"], err["field"]) == ("invalid_request", "$.name")
    assert "lowercase letters a-z, digits, `-` and `_`" in err["message"]
    assert "regex" not in err["message"] and "[a-z0-9]" not in err["message"]
    cli = agentpost(hub, "admin", "workspace", "create", "Acme", "--json", check=False)
    assert cli.returncode == 1 and "1-63 characters" in json_error(cli)["message"]
    with hub.client(hub.admin_token) as admin:  # nothing was made
        assert admin.get("/v1/admin/workspaces").json()["workspaces"] == []


def test_llm_router_is_refused_at_room_creation_without_an_endpoint(setup: Setup) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post("/v1/workspaces/acme/rooms", json={"name": "ask", "router": "llm"})
        assert r.status_code == 400 and r.json()["error"]["field"] == "$.router"
        names = [x["name"] for x in c.get("/v1/workspaces/acme/rooms").json()["rooms"]]
    assert "ask" not in names
    p = agentpost(
        setup.hub,
        "room",
        "settings",
        "general",
        "--router",
        "llm",
        "--json",
        token=setup.tokens["alice"],
        check=False,
    )
    assert p.returncode == 1 and "AGENTPOST_ROUTER_URL" in json_error(p)["message"]


def test_back_in_dynamic_mode_a_room_has_no_master(setup: Setup) -> None:
    alice = setup.tokens["alice"]
    with setup.hub.client(alice) as c:
        r = c.patch(f"/v1/rooms/{setup.room}", json={"mode": "master", "master": "bot"})
        assert r.json()["room"]["master"] == "bot"
        r = c.patch(f"/v1/rooms/{setup.room}", json={"mode": "dynamic"})
        assert (r.json()["room"]["mode"], r.json()["room"]["master"]) == ("dynamic", None)
        assert c.get(f"/v1/rooms/{setup.room}").json()["room"]["master"] is None
        again = c.patch(f"/v1/rooms/{setup.room}", json={"mode": "master"})
        assert again.status_code == 400 and again.json()["error"]["field"] == "$.master"
