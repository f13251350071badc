"""`wait_for_receipt`: an MCP agent that delegated (post_message @mentioning an agent) waits
for the delegate's receipt without reading its inbox (docs/mcp.md "Waiting for a delegate")."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from mcp import Client
from mcphelpers import McpServer, call, mcp_server  # noqa: F401 (a fixture)

from hubproc import Setup


def _reply(setup: Setup, event_id: str, kind: str, text: str) -> None:
    with setup.hub.client(setup.tokens["bot"]) as bot:
        r = bot.post(
            f"/v1/rooms/{setup.room}/messages",
            json={"text": text, "in_reply_to": event_id, "reply_kind": kind},
        )
        assert r.status_code == 201, r.text


def test_a_delegation_answered_with_a_result_returns_the_receipt_and_its_text(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    async def scenario(c: Client) -> Any:
        asked = await call(c, "post_message", {"room": "general", "text": "@bot draft the notes"})
        event_id = asked[1]["event"]
        early = await call(c, "wait_for_receipt", {"event_id": event_id, "wait": 0})
        # the delegate answers while the tool waits
        answer = threading.Thread(
            target=_reply, args=(setup, event_id, "result", "notes are in notes.md")
        )
        answer.start()
        got = await call(c, "wait_for_receipt", {"event_id": event_id, "wait": 30})
        answer.join()
        return event_id, early, got

    event_id, (early_err, early), (err, got) = mcp_server(member="helper").run(scenario)
    assert not early_err and early["state"] == "pending"
    assert [r["state"] for r in early["receipts"]] == ["pending"]
    assert not err, got
    assert got["event_id"] == event_id and got["state"] == "replied"
    [receipt] = got["receipts"]
    assert receipt["member"] == "bot" and receipt["reply_kind"] == "result"
    assert receipt["text"] == "notes are in notes.md"
    assert receipt["receipt_event"].startswith("ev_")


def test_a_wait_that_ends_first_says_pending(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    async def scenario(c: Client) -> Any:
        asked = await call(c, "post_message", {"room": "general", "text": "@bot take a while"})
        return await call(c, "wait_for_receipt", {"event_id": asked[1]["event"], "wait": 0.5})

    err, body = mcp_server(member="helper").run(scenario)
    assert not err and body["state"] == "pending"
    assert body["receipts"] == [
        {"member": "bot", "state": "pending", "reply_kind": None, "receipt_event": None, "needs_input": 0}
    ]


def test_bad_ids_waits_and_events_that_delegated_nothing_are_refused(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    async def scenario(c: Client) -> Any:
        plain = await call(c, "post_message", {"room": "general", "text": "no one is asked"})
        return [
            await call(c, "wait_for_receipt", {"event_id": "ev_bad"}),
            await call(c, "wait_for_receipt", {"event_id": "ev_" + "0" * 26, "wait": 61}),
            await call(c, "wait_for_receipt", {"event_id": "ev_" + "0" * 26, "wait": 1}),
            await call(c, "wait_for_receipt", {"event_id": plain[1]["event"], "wait": 1}),
        ]

    codes = [body["error"]["code"] for err, body in mcp_server(member="helper").run(scenario) if err]
    assert codes == ["invalid_arguments", "invalid_arguments", "event_not_found", "not_a_delegation"]
