"""Failures are tool errors with a stable code, a message and `retryable`; the server itself
never goes down for bad input (docs/mcp.md)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcphelpers import McpServer, call, events_of, mcp_server  # noqa: F401 (a fixture)

from agentpost.mcp import TOOLS
from hubproc import Setup


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_hub_down_is_hub_unreachable_and_retryable_and_a_retry_later_posts_once(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    args = {"room": setup.room, "text": "are you there", "idempotency_key": "ping-1"}
    down = mcp_server()
    down.hub_url = _closed_port_url()

    async def scenario(c: Client) -> Any:
        return [
            await call(c, "post_message", args),
            await call(c, "ack_inbox", {"cursor": 1}),
            await call(c, "list_rooms"),
        ]

    posted, acked, listed = down.run(scenario)
    for err, body in (posted, acked, listed):
        assert err and body["error"]["code"] == "hub_unreachable"
        assert body["error"]["retryable"] is True
        assert "?." not in body["error"]["message"]  # the client's question ends its sentence
    # Said for the kind of tool: a post may have happened, a read changed nothing.
    assert "The post_message may or may not have posted" in posted[1]["error"]["message"]
    assert "same idempotency_key" in posted[1]["error"]["message"]
    assert "ack_inbox may or may not have taken effect" in acked[1]["error"]["message"]
    said = listed[1]["error"]["message"]
    assert "Nothing changed (list_rooms only reads)" in said and "posted" not in said
    assert events_of(setup) == []

    async def retry(c: Client) -> Any:
        return [await call(c, "post_message", args) for _ in range(2)]

    results = mcp_server().run(retry)
    assert [r["delivery"] for _, r in results] == ["sent", "replayed"]
    assert len(events_of(setup)) == 1


def test_a_hub_killed_mid_session_is_hub_unreachable_and_the_server_keeps_answering(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    async def scenario(c: Client) -> Any:
        ok = await call(c, "list_rooms")
        setup.hub.kill()  # SIGKILL
        gone = await call(c, "post_message", {"room": setup.room, "text": "x"})
        tools = await c.list_tools()
        return ok, gone, sorted(t.name for t in tools.tools)

    ok, gone, n = mcp_server().run(scenario)
    assert not ok[0]
    assert gone[0] and gone[1]["error"]["code"] == "hub_unreachable", gone
    assert gone[1]["error"]["retryable"] is True
    assert n == sorted(spec.name for spec in TOOLS)  # every tool still listed


def test_a_bad_token_is_final_and_names_agentpost_token(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    server = mcp_server()
    server.token = "ap_not-a-real-token"

    async def scenario(c: Client) -> Any:
        return [
            await call(c, name, args)
            for name, args in [
                ("post_message", {"room": setup.room, "text": "x"}),
                ("send_to_thread", {"thread": setup.room, "text": "x", "idempotency_key": "k"}),
                ("read_inbox", {}),
                ("list_rooms", {}),
            ]
        ]

    for err, body in server.run(scenario):
        assert err and body["error"]["code"] == "unauthorized"
        assert body["error"]["retryable"] is False
        assert "AGENTPOST_TOKEN" in body["error"]["message"]
    assert events_of(setup) == []


def test_no_token_is_final_and_names_agentpost_token(mcp_server: Callable[..., McpServer]) -> None:
    async def scenario(c: Client) -> Any:
        return await call(c, "list_rooms")

    err, body = mcp_server(member=None).run(scenario)
    assert err and body["error"]["code"] == "unauthorized"
    assert "AGENTPOST_TOKEN is not set" in body["error"]["message"]
    assert "--token-file FILE" in body["error"]["message"]  # the way that keeps it off argv


def test_a_path_outside_the_roots_is_refused_as_that_with_the_hub_down(
    setup: Setup, mcp_server: Callable[..., McpServer], tmp_path: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    down = mcp_server(roots=[root])
    down.hub_url = _closed_port_url()

    async def scenario(c: Client) -> Any:
        return await call(c, "upload_file", {"room": setup.room, "path": "/etc/passwd"})

    err, body = down.run(scenario)
    assert err and body["error"]["code"] == "path_outside_roots", body


def test_a_removed_member_is_refused_at_once_and_nothing_is_posted(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    def remove_bot() -> None:
        with setup.hub.client(setup.hub.admin_token) as admin:
            r = admin.delete(f"/v1/admin/workspaces/{setup.workspace}/members/bot")
            assert r.status_code == 200, r.text

    async def scenario(c: Client) -> Any:
        before = await call(c, "post_message", {"room": setup.room, "text": "one"})
        remove_bot()
        after = [
            await call(c, "post_message", {"room": setup.room, "text": "two"}),
            await call(c, "read_inbox"),
        ]
        return before, after

    before, after = mcp_server().run(scenario)
    assert not before[0]
    for err, body in after:
        assert err and body["error"]["code"] == "agent_removed"
        assert body["error"]["retryable"] is False
    assert [e["text"] for e in events_of(setup)] == ["one"]


MALFORMED: list[tuple[str, dict[str, Any]]] = [
    ("post_message", {}),
    ("post_message", {"room": "general"}),
    ("post_message", {"room": "general", "text": 5}),
    ("post_message", {"room": 7, "text": "x"}),
    ("post_message", {"room": "general", "text": ""}),
    ("post_message", {"room": "general", "text": "   "}),
    ("post_message", {"room": "general", "text": "x", "idempotency_key": ""}),
    ("post_message", {"room": "general", "text": "x", "idempotency_key": "k" * 256}),
    ("post_message", {"room": "general", "text": "x", "extra": True}),
    ("post_message", {"room": ["general"], "text": {"a": 1}}),
    ("reply", {"event_id": "ev_x", "text": "x", "reply_kind": "done"}),
    ("reply", {"text": "x"}),
    ("send_to_thread", {"thread": "t", "text": "x"}),
    ("ensure_thread", {"name": ""}),
    ("upload_file", {"room": "general"}),
    ("read_inbox", {"wait": -1}),
    ("read_inbox", {"wait": "soon"}),
    ("read_inbox", {"after": -5}),
    ("read_inbox", {"after": 2**64}),
    ("ack_inbox", {}),
    ("ack_inbox", {"cursor": "1"}),
    ("list_rooms", {"room": "general"}),
    ("read_room", {"room": "general", "limit": 0}),
    ("read_room", {"room": "general", "after": 1.5}),
]


def test_malformed_arguments_are_clear_tool_errors_and_never_crash_the_server(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    async def scenario(c: Client) -> Any:
        bad = [(name, args, await call(c, name, args)) for name, args in MALFORMED]
        with pytest.raises(MCPError) as unknown:
            await c.call_tool("delete_everything", {})
        still = await call(c, "post_message", {"room": "general", "text": "still here"})
        return bad, unknown, still

    bad, unknown, still = mcp_server().run(scenario)
    for name, args, (err, body) in bad:
        assert err, (name, args)
        assert body["error"]["code"] == "invalid_arguments", (name, args, body)
        assert body["error"]["retryable"] is False
        assert body["error"]["message"], (name, args)
    # no such tool is a protocol error, as the MCP spec says: -32602 "Unknown tool: <name>"
    assert unknown.value.error.code == -32602
    assert unknown.value.error.message == "Unknown tool: delete_everything"
    assert not still[0] and still[1]["delivery"] == "sent"
    assert [e["text"] for e in events_of(setup)] == ["still here"]


def test_a_key_the_hub_would_refuse_is_refused_before_anything_is_sent(
    setup: Setup, mcp_server: Callable[..., McpServer]
) -> None:
    thread = {"thread": "notes", "text": "x"}

    async def scenario(c: Client) -> Any:
        made = await call(c, "ensure_thread", {"name": "notes"})
        return made, [
            await call(c, "post_message", {"room": setup.room, "text": "x", "idempotency_key": "has space"}),
            await call(c, "reply", {"event_id": "ev_" + "0" * 26, "text": "x", "idempotency_key": "é"}),
            await call(c, "upload_file", {"room": setup.room, "path": "x", "idempotency_key": "k" * 256}),
            # a thread send's key is UTF-8 up to 255 bytes: 200 characters of 2 bytes is 400
            await call(c, "send_to_thread", {**thread, "idempotency_key": "é" * 200}),
            await call(c, "send_to_thread", {**thread, "idempotency_key": ""}),
        ], await call(c, "send_to_thread", {**thread, "idempotency_key": "é" * 127})

    made, refused, fits = mcp_server().run(scenario)
    assert not made[0]
    for err, body in refused:
        assert err and body["error"]["code"] == "invalid_arguments", body
        assert body["error"]["retryable"] is False
    assert "1-255 visible ASCII characters" in refused[0][1]["error"]["message"]
    assert "idempotency_key is 400 bytes; it must be 1-255 bytes of UTF-8" in refused[3][1]["error"]["message"]
    assert not fits[0] and fits[1]["delivery"] == "sent", "254 bytes of UTF-8 is a key"
    assert events_of(setup) == []
    assert [e["text"] for e in events_of(setup, made[1]["room"], token_of="bot")] == ["x"]


def test_the_token_can_come_from_a_token_file(
    setup: Setup, mcp_server: Callable[..., McpServer], tmp_path: Path
) -> None:
    token_file = tmp_path / "bot.token"
    token_file.write_text(setup.tokens["bot"] + "\n")
    token_file.chmod(0o600)
    server = mcp_server(member=None, extra_args=["--token-file", str(token_file)])

    async def scenario(c: Client) -> Any:
        return await call(c, "post_message", {"room": "general", "text": "from the file"})

    err, body = server.run(scenario)
    assert not err and body["delivery"] == "sent"
    assert [e["sender"] for e in events_of(setup)] == ["bot"]


@pytest.mark.parametrize("problem", ["missing", "open to others"])
def test_a_token_file_that_cannot_be_used_is_said_by_every_call_and_the_server_still_starts(
    setup: Setup, mcp_server: Callable[..., McpServer], tmp_path: Path, problem: str
) -> None:
    token_file = tmp_path / "bot.token"
    if problem == "open to others":
        token_file.write_text(setup.tokens["bot"] + "\n")
        token_file.chmod(0o644)
        said = (
            f"the token file {token_file} is open to other users (mode 0644); "
            f"run `chmod 600 {token_file}`"
        )
    else:
        said = f"cannot read the token file {token_file}: No such file or directory"
    server = mcp_server(member=None, extra_args=["--token-file", str(token_file)])

    async def scenario(c: Client) -> Any:
        listed = (await c.list_tools()).tools
        return listed, [
            await call(c, "post_message", {"room": "general", "text": "not sent"}),
            await call(c, "read_inbox"),
        ]

    listed, calls = server.run(scenario)
    assert len(listed) == len(TOOLS), "a client still connects and sees every tool"
    for err, body in calls:
        assert err and body["error"]["code"] == "token_file_refused", body
        assert body["error"]["message"].startswith(said), body
        assert body["error"]["retryable"] is False
    assert events_of(setup) == []
    stderr = server.log.read_text().splitlines()
    assert stderr == [f"agentpost mcp: {said}; every tool call will say so"], "said once"
