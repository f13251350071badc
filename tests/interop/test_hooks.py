"""`agentpost inbox hook` in each client's own hooks — Claude Code (`SessionStart`,
`UserPromptSubmit`, `Stop` in settings.json), Codex (the same events in hooks.json) and
Gemini CLI (`SessionStart`, `BeforeAgent`, `AfterAgent` in settings.json) — each fed the
JSON the client writes on the hook's stdin: every new session is shown every unacknowledged
wake-up, each once, and one that arrives during a turn keeps the session going."""

from __future__ import annotations

import json
import shlex
import sys
import threading
from pathlib import Path

import pytest
from agentrun import Room
from fakes.base import FakeServer
from mcpclients import McpClient

from hubproc import poll

# Each client's event names for the hook's three moments, and its timeout unit.
EVENTS = {
    "claude": {"SessionStart": "session-start", "UserPromptSubmit": "prompt", "Stop": "stop"},
    "codex": {"SessionStart": "session-start", "UserPromptSubmit": "prompt", "Stop": "stop"},
    "gemini": {"SessionStart": "session-start", "BeforeAgent": "prompt", "AfterAgent": "stop"},
}


def install_hooks(client: McpClient, hub_url: str, token_file: Path) -> None:
    """The hooks as docs/mcp.md tells each client's users to configure them."""
    timeout = 30000 if client.vendor == "gemini" else 30

    def entry(kind: str) -> list[dict[str, object]]:
        command = shlex.join([sys.executable, "-m", "agentpost", "inbox", "hook", kind,
                              "--hub", hub_url, "--token-file", str(token_file)])
        return [{"hooks": [{"type": "command", "command": command, "timeout": timeout}]}]

    hooks = {event: entry(kind) for event, kind in EVENTS[client.vendor].items()}
    if client.vendor == "claude":
        (client.home / ".claude").mkdir(exist_ok=True)
        (client.home / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    elif client.vendor == "codex":
        (client.home / ".codex" / "hooks.json").write_text(json.dumps({"hooks": hooks}))
        # Codex runs a user's hook only once it is trusted (its TUI's /hooks review); a
        # headless `codex exec` here says so on its command line instead.
        client.extra = ("--dangerously-bypass-hook-trust",)
    else:
        path = client.home / ".gemini" / "settings.json"
        settings = json.loads(path.read_text())
        settings["hooks"] = hooks
        path.write_text(json.dumps(settings))


@pytest.fixture
def client(mcp_client: McpClient, room: Room) -> McpClient:
    install_hooks(mcp_client, room.hub.url, room.token_file())
    return mcp_client


def _requests(fake: FakeServer, since: int = 0) -> list[str]:
    """The model requests of the main conversation (those that offer tools), as JSON."""
    out = []
    for rec in fake.conversations()[since:]:
        body = rec.body if isinstance(rec.body, dict) else {}
        if body.get("tools"):
            out.append(json.dumps(body))
    return out


def test_every_new_session_is_shown_an_unacknowledged_wake_up(room: Room, client: McpClient) -> None:
    ev = room.say("alice", "@bot the release notes need a final pass")
    first = client.run("fake:say ok")
    assert first.returncode == 0, (client.model.errors, first.stderr[-2000:])
    seen = _requests(client.model)
    assert seen and ev["id"] in seen[0], f"session one was not shown the wake-up: {first.stderr[-2000:]}"
    # Shown once: the prompt hook of the same session does not repeat it.
    assert seen[0].count(f"event {ev['id']}") == 1, "shown twice in one session"

    mark = len(client.model.conversations())
    second = client.run("fake:say ok again")
    assert second.returncode == 0, second.stderr[-2000:]
    again = _requests(client.model, mark)
    # A new session (another session_id on the hooks' stdin): shown again, as nobody acked it.
    assert again and ev["id"] in again[0], "a new session was not shown the wake-up"


def test_a_wake_up_during_a_turn_keeps_the_session_going(room: Room, client: McpClient) -> None:
    fake = client.model
    done: dict[str, object] = {}

    def run() -> None:
        done["result"] = client.run("fake:slow 3")

    t = threading.Thread(target=run)
    t.start()
    poll(lambda: any("fake:slow" in json.dumps(r.body) for r in fake.conversations()), timeout=60)
    ev = room.say("alice", "@bot one more thing: add the changelog link")
    t.join(120)
    result = done["result"]
    assert getattr(result, "returncode", None) == 0, getattr(result, "stderr", "")[-2000:]
    # The stop hook held the session with the new wake-up; the client went on with it.
    assert [b for b in _requests(fake) if ev["id"] in b], "the stop hook did not show the wake-up"
