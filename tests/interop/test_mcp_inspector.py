"""The MCP Inspector's CLI (`@modelcontextprotocol/inspector`, from npm) as a client of
`agentpost mcp`: it lists the tools, and a keyed post called twice (two sessions) posts once."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from agentrun import Room
from mcpclients import mcp_command


def _inspect(room: Room, agents_bin: Path, *method: str) -> dict[str, object]:
    token_file = room.token_file()
    cmd = [str(agents_bin / "mcp-inspector"), "--cli",
           *mcp_command(room.hub.url, token_file), *method]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, object] = json.loads(done.stdout)
    return out


def test_the_inspector_lists_the_tools(room: Room, agents_bin: Path) -> None:
    listed = _inspect(room, agents_bin, "--method", "tools/list")
    names = {t["name"] for t in listed["tools"]}  # type: ignore[attr-defined]
    assert {"post_message", "reply", "read_inbox", "ack_inbox", "upload_file"} <= names


def test_a_keyed_post_from_two_inspector_sessions_posts_once(room: Room, agents_bin: Path) -> None:
    call = ["--method", "tools/call", "--tool-name", "post_message", "--tool-arg",
            "room=general", "text=from the inspector", "idempotency_key=inspector-1"]
    first = _inspect(room, agents_bin, *call)
    second = _inspect(room, agents_bin, *call)
    assert first["structuredContent"]["delivery"] == "sent"  # type: ignore[index]
    assert second["structuredContent"]["delivery"] == "replayed"  # type: ignore[index]
    assert len([e for e in room.events() if e["text"] == "from the inspector"]) == 1
