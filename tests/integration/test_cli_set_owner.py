"""`agentpost admin member set-owner` (docs/cli.md): the admin names an agent's owner, the
one way an agent whose owner was removed hard gets one again (docs/architecture.md#identity);
refusals keep the stable error contract (one JSON object, exit 1; a bad command line 2)."""

from __future__ import annotations

import json

import pytest

from clirun import agentpost, json_error
from hubproc import Setup


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def test_the_admin_names_an_owner_after_a_hard_removal(setup: Setup) -> None:
    hub, ws = setup.hub, setup.workspace
    agentpost(hub, "admin", "member", "remove", ws, "alice", "--hard")
    listed = json.loads(agentpost(hub, "admin", "member", "list", ws, "--json").stdout)
    assert {m["name"]: m["owner_id"] for m in listed["members"]}["bot"] is None
    made = json.loads(
        agentpost(
            hub, "admin", "member", "set-owner", ws, "bot", "--owner", "carol", "--json"
        ).stdout
    )
    carol = json.loads(agentpost(hub, "whoami", "--json", token=setup.tokens["carol"]).stdout)
    assert made["member"]["owner"] == "carol"
    assert made["member"]["owner_id"] == carol["member"]["id"]
    plain = agentpost(hub, "admin", "member", "set-owner", ws, "bot", "--no-owner")
    assert "bot has no owner" in plain.stdout


def test_set_owner_refusals_are_one_json_error_and_exit_1(setup: Setup) -> None:
    hub, ws = setup.hub, setup.workspace
    cases = [
        (("bot", "--owner", "helper"), "invalid_request"),  # an agent owns no agent
        (("carol", "--owner", "alice"), "invalid_request"),  # a person has no owner
        (("zed", "--owner", "alice"), "member_not_found"),
    ]
    for args, want in cases:
        p = agentpost(hub, "admin", "member", "set-owner", ws, *args, "--json", check=False)
        assert (p.returncode, json_error(p)["code"]) == (1, want), p.stdout
    p = agentpost(
        hub,
        "admin",
        "member",
        "set-owner",
        "nowhere",
        "bot",
        "--owner",
        "alice",
        "--json",
        check=False,
    )
    assert (p.returncode, json_error(p)["code"]) == (1, "no_workspace")
    p = agentpost(hub, "admin", "member", "set-owner", ws, "bot", "--json", check=False)
    assert (p.returncode, json_error(p)["code"]) == (2, "usage_error")
