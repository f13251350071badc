"""Claude Code, Codex and Gemini CLI as MCP clients of `agentpost mcp`: the tools are there
on the model's first request, and keyed or derived-key retries post once."""

from __future__ import annotations

import json
import re

import pytest
from agentrun import Room
from mcpclients import McpClient

TOOLS = ("post_message", "reply", "read_inbox", "ack_inbox", "read_room", "upload_file")


@pytest.fixture
def client(mcp_client: McpClient) -> McpClient:
    return mcp_client


def _first_request(client: McpClient) -> str:
    """The client's first request that offered the model tools, as JSON text."""
    for rec in client.model.conversations():
        body = rec.body if isinstance(rec.body, dict) else {}
        if body.get("tools"):
            return json.dumps(body)
    return ""


def _texts(room: Room, text: str) -> list[dict[str, object]]:
    return [e for e in room.events() if e["text"] == text]


def test_the_tools_are_offered_on_the_first_request(room: Room, client: McpClient) -> None:
    done = client.run("fake:say nothing to do")
    assert done.returncode == 0, (client.model.errors, done.stderr[-3000:])
    first = _first_request(client)
    if client.vendor == "codex":
        # Codex defers every MCP server's tools behind tool_search and names the server in
        # the first request; one that answered too late is added in a later message.
        assert "Deferred tool namespaces:\\n- mcp__agentpost:" in first, first[-3000:]
    else:
        # Claude Code names the MCP tools it defers in the prompt; Gemini CLI declares them.
        missing = [t for t in TOOLS if not re.search(rf"agentpost_+{t}\b", first)]
        assert missing == [], first[-3000:]


def test_a_keyed_retry_posts_once(room: Room, client: McpClient) -> None:
    args = json.dumps({"room": "general", "text": "keyed hello", "idempotency_key": "interop-k1"})
    done = client.run(f"fake:calls post_message {args} || post_message {args}")
    assert done.returncode == 0, (client.model.errors, done.stderr[-3000:])
    assert len(_texts(room, "keyed hello")) == 1
    out = done.stdout
    assert re.search(r'delivery\\?"\s*:\s*\\?"sent', out), out
    assert re.search(r'delivery\\?"\s*:\s*\\?"replayed', out), out


def test_a_retry_without_a_key_posts_once(room: Room, client: McpClient) -> None:
    args = json.dumps({"room": "general", "text": "derived hello"})
    done = client.run(f"fake:calls post_message {args} || post_message {args}")
    assert done.returncode == 0, (client.model.errors, done.stderr[-3000:])
    assert len(_texts(room, "derived hello")) == 1
    assert "replayed" in done.stdout, done.stdout
