"""Claude Code's own hooks (`SessionStart`, `UserPromptSubmit`, `Stop`, in its settings.json,
with the JSON it writes on their stdin) running `agentpost inbox hook`: every new session
is shown every unacknowledged wake-up, each once, and a wake-up that arrives during a turn
keeps the session going."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentrun import Room
from fakes.anthropic import FakeAnthropic
from fakes.base import FakeServer
from mcpclients import McpClient, configure
from scripts import delay_for, script_for

from hubproc import poll

BLOCK = "new wake-up"


@pytest.fixture
def claude(room: Room, agents_bin: Path) -> Iterator[McpClient]:
    fake = FakeAnthropic(script_for("claude"), delay_for).start()
    token_file = room.tmp / "bot.token"
    token_file.write_text(room.setup.tokens["bot"])
    token_file.chmod(0o600)
    client = configure("claude", fake, room.tmp / "home", agents_bin, room.hub.url, token_file)
    hook = [sys.executable, "-m", "agentpost", "inbox", "hook"]
    tail = f"--hub {room.hub.url} --token-file {token_file}"

    def entry(kind: str) -> list[dict[str, object]]:
        command = " ".join([*hook, kind, tail])
        return [{"hooks": [{"type": "command", "command": command, "timeout": 30}]}]

    settings = {"hooks": {"SessionStart": entry("session-start"),
                          "UserPromptSubmit": entry("prompt"), "Stop": entry("stop")}}
    (client.home / ".claude").mkdir(exist_ok=True)
    (client.home / ".claude" / "settings.json").write_text(json.dumps(settings))
    yield client
    fake.stop()


def _shown(fake: FakeServer, since: int = 0) -> list[str]:
    """What each model request of the main conversation was told by the hooks."""
    out = []
    for rec in fake.conversations()[since:]:
        body = rec.body if isinstance(rec.body, dict) else {}
        if body.get("tools"):
            out.append(json.dumps(body))
    return out


def test_every_new_session_is_shown_an_unacknowledged_wake_up(room: Room, claude: McpClient) -> None:
    ev = room.say("alice", "@bot the release notes need a final pass")
    first = claude.run("fake:say ok")
    assert first.returncode == 0, (claude.model.errors, first.stderr[-2000:])
    seen = _shown(claude.model)
    assert seen and ev["id"] in seen[0], "session one was not shown the wake-up"
    assert seen[0].count(f"event {ev['id']}") == 1, "shown twice in one request"

    mark = len(claude.model.conversations())
    second = claude.run("fake:say ok again")
    assert second.returncode == 0, second.stderr[-2000:]
    again = _shown(claude.model, mark)
    # A new session (a new session_id on the hooks' stdin): shown again, as nobody acked it.
    assert again and ev["id"] in again[0], "a new session was not shown the wake-up"


def test_a_wake_up_during_a_turn_keeps_the_session_going(room: Room, claude: McpClient) -> None:
    fake = claude.model
    done: dict[str, object] = {}

    def run() -> None:
        done["result"] = claude.run("fake:slow 3")

    t = threading.Thread(target=run)
    t.start()
    poll(lambda: any("fake:slow" in json.dumps(r.body) for r in fake.conversations()), timeout=60)
    ev = room.say("alice", "@bot one more thing: add the changelog link")
    t.join(120)
    result = done["result"]
    assert getattr(result, "returncode", None) == 0
    # The Stop hook blocked with the new wake-up; Claude Code went on with it as input.
    later = [b for b in _shown(fake) if ev["id"] in b]
    assert later, "the Stop hook did not show the wake-up"
