"""`agentpost edit`, `react`, `redact` (docs/cli.md) and the SDK's `edit`, `react`,
`redact` (sync and async) against a real hub, on both engines."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentpost.client import AsyncHubClient, HubClient, HubRefused
from clirun import agentpost, json_error
from hubproc import Setup


@pytest.fixture
def setup(shared_setup: Setup) -> Setup:
    return shared_setup


def test_the_cli_edits_reacts_and_redacts(setup: Setup) -> None:
    hub, alice, carol = setup.hub, setup.tokens["alice"], setup.tokens["carol"]
    posted = json.loads(
        agentpost(hub, "post", "general", "-t", "helo", "--json", token=alice).stdout
    )
    target = posted["event"]["id"]
    edited = json.loads(
        agentpost(
            hub, "edit", "general", target, "-t", "hello", "-k", "e1", "--json", token=alice
        ).stdout
    )
    assert edited["event"]["type"] == "edit" and edited["event"]["relates_to"] == target
    again = agentpost(hub, "edit", "general", target, "-t", "hello", "-k", "e1", token=alice)
    assert again.stdout.startswith("replayed")
    said = agentpost(hub, "react", "general", target, "🎉", token=carol)
    assert said.stdout.startswith("reacted 🎉 to " + target)
    line = agentpost(hub, "tail", "general", token=carol).stdout.splitlines()[0]
    assert "hello" in line and "(edited)" in line and "🎉1" in line
    refused = agentpost(hub, "redact", "general", target, "--json", token=carol, check=False)
    assert refused.returncode == 1 and json_error(refused)["code"] == "not_event_sender"
    bad = agentpost(hub, "react", "general", target, "a b", "--json", token=carol, check=False)
    assert bad.returncode == 1 and json_error(bad)["code"] == "invalid_emoji"
    gone = agentpost(hub, "redact", "general", target, "--reason", "typo", token=alice)
    assert gone.stdout.startswith("redacted " + target)
    line = agentpost(hub, "tail", "general", token=carol).stdout.splitlines()[0]
    assert "(message deleted)" in line and "hello" not in line


def test_the_sync_and_async_sdk(setup: Setup) -> None:
    with HubClient(setup.hub.url, setup.tokens["alice"]) as alice:
        ev = alice.post_message(setup.room, "v1").event
        res = alice.edit(setup.room, ev.id, "v2", key="sdk-e1")
        assert res.event.relates_to == ev.id and res.idempotency_status == "created"
        assert alice.event(ev.id).text == "v2" and alice.event(ev.id).edited

    async def carol_reacts() -> None:
        async with AsyncHubClient(setup.hub.url, setup.tokens["carol"]) as carol:
            r = await carol.react(setup.room, ev.id, "👍")
            assert r.event.metadata == {"emoji": "👍"}
            shown = await carol.event(ev.id)
            assert [(x.emoji, x.count, x.members) for x in shown.reactions] == [
                ("👍", 1, ["carol"])
            ]
            await carol.react(setup.room, ev.id, "👍", remove=True)
            assert (await carol.event(ev.id)).reactions == []
            with pytest.raises(HubRefused) as refused:
                await carol.redact(setup.room, ev.id)
            assert refused.value.code == "not_event_sender"

    asyncio.run(carol_reacts())
    with HubClient(setup.hub.url, setup.tokens["alice"]) as alice:
        red = alice.redact(setup.room, ev.id, "wrong")
        assert red.event.type == "redaction" and red.event.metadata == {"reason": "wrong"}
        shown = alice.event(ev.id)
        assert shown.redacted and shown.text == ""
