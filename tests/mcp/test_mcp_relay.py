"""Two agents that relay through MCP `post_message` (a new message, no `in_reply_to`): each
wake-up read with `read_inbox` is answered by a post mentioning the other agent. Before
the cause (docs/delegation.md "Cause") every hop was depth 1 and the relay ran for ever;
now every post stays in alice's chain and the relay ends with one notice."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import stdio_client
from mcphelpers import McpServer, call, events_of, mcp_server  # noqa: F401 (a fixture)

from hubproc import Setup


def test_two_agents_relaying_by_post_message_stop_with_one_notice(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    servers = {"bot": mcp_server("bot"), "helper": mcp_server("helper")}
    other = {"bot": "helper", "helper": "bot"}
    with setup.hub.client(setup.tokens["alice"]) as alice:
        r = alice.post(f"/v1/rooms/{setup.room}/messages", json={"text": "@bot relay to helper"})
        assert r.status_code == 201, r.text
        start = r.json()["event"]

    async def main() -> list[dict[str, Any]]:
        posted: list[dict[str, Any]] = []
        with open(servers["bot"].log, "a") as errlog:
            async with (
                Client(stdio_client(servers["bot"].params(), errlog=errlog)) as bot,  # type: ignore[arg-type]
                Client(stdio_client(servers["helper"].params(), errlog=errlog)) as helper,  # type: ignore[arg-type]
            ):
                clients = {"bot": bot, "helper": helper}
                for _ in range(100):
                    woke = False
                    for me, c in clients.items():
                        failed, page = await call(c, "read_inbox")
                        assert not failed, page
                        for item in page["items"]:
                            woke = True
                            failed, out = await call(
                                c,
                                "post_message",
                                {
                                    "room": item["event"]["room"],
                                    # a text of its own: the tool's key is made from it
                                    "text": f"@{other[me]} relay on, hop {len(posted) + 1}",
                                },
                            )
                            assert not failed, out
                            posted.append(out)
                        if page["items"]:
                            await call(c, "ack_inbox", {"cursor": page["cursor"]})
                    if not woke:
                        return posted
        raise AssertionError("still relaying after 100 rounds")

    posted = anyio.run(main)
    assert 2 <= len(posted) < 30
    evs = events_of(setup)
    relayed = [e for e in evs if "relay on, hop" in e["text"]]
    assert {e["cause"]["origin"] for e in relayed} == {start["id"]}
    assert [e["metadata"]["delegation_depth"] for e in relayed] == list(range(1, len(relayed) + 1))
    assert relayed[-1]["route"] in ("depth_limit", "origin_limit")
    notices = [e for e in evs if e["type"] == "notice"]
    assert len(notices) == 1 and notices[0]["in_reply_to"] == relayed[-1]["id"]
    assert len(evs) < 60
