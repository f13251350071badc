"""Two real Workers whose agents quote each other's mentions (docs/delegation.md "Depth and
budget"): bot and helper, both owned by alice, each running the example echo agent, whose
reply repeats the text it got, mentions and all. Without the depth limit they would bounce
for ever; with it the chain ends at depth 9 with one notice."""

from __future__ import annotations

import pytest

from conftest import Connected, wait_for
from hubproc import HubProcess


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


def test_two_echo_agents_quoting_each_other_stop_at_the_depth_limit(connected: Connected) -> None:
    connected.worker(member="bot")
    connected.worker(member="helper")
    start = connected.say("bot", "@helper ping @bot")  # a delegation at depth 1
    assert start["metadata"]["delegation_depth"] == 1

    def stopped() -> dict[str, object] | None:
        evs = connected.events()
        return next((e for e in evs if e["route"] == "depth_limit"), None)

    last = wait_for(stopped, timeout=180)
    assert last["sender"] == "bot" and last["targets"] == []
    assert last["metadata"] == {"delegation_depth": 9}

    def settled(who: str) -> bool:
        with connected.hub.client(connected.setup.tokens[who]) as c:
            items = c.get("/v1/inbox", params={"after": 0, "limit": 1000}).json()["items"]
        return bool(items) and connected.acked(who) >= max(i["cursor"] for i in items)

    # Each Worker acknowledged its last wake-up (after its reply): nothing more is coming.
    wait_for(lambda: settled("bot") and settled("helper"), timeout=60)
    evs = connected.events()
    agents = [e for e in evs if e["sender"] in ("bot", "helper")]
    # bot's delegations at depths 1..8, helper's receipts at 1..8, bot's 9th stopped.
    assert len(agents) == 17, [(e["sender"], e["route"]) for e in agents]
    assert [e["metadata"].get("delegation_depth") for e in agents] == [
        d for d in range(1, 9) for _ in (0, 1)
    ] + [9]
    assert [e["route"] for e in agents if e["sender"] == "helper"] == ["receipt"] * 8
    notices = [e for e in evs if e["type"] == "notice"]
    assert len(notices) == 1 and notices[0]["in_reply_to"] == last["id"]
    assert len(evs) == 18
