"""Review of issue 25 (attack): the inbox hook's Stop loop protection must never hide a
wake-up from a session (docs/mcp.md: "the worst case is a wake-up shown twice, never one
hidden")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from hubproc import Setup


def _hook(
    setup: Setup, state: Path, event: str, given: dict[str, object], now: float | None = None
) -> str:
    env = {**os.environ, "AGENTPOST_HUB": setup.hub.url, "XDG_STATE_HOME": str(state),
           "AGENTPOST_TOKEN": setup.tokens["bot"]}
    if now is not None:  # past the prompt hook's 30 s pause
        env["AGENTPOST_HOOK_NOW"] = str(now)
    p = subprocess.run(
        [sys.executable, "-m", "agentpost", "inbox", "hook", event],
        capture_output=True, text=True, env=env, timeout=60, input=json.dumps(given),
    )
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_a_continued_stop_without_state_does_not_hide_the_wake_up_from_the_session(
    setup: Setup, tmp_path: Path
) -> None:
    with setup.hub.client(setup.tokens["alice"]) as c:
        r = c.post(f"/v1/rooms/{setup.room}/messages", json={"text": "@bot please answer"})
        assert r.status_code == 201, r.text
    state = tmp_path / "state"
    base = {"session_id": "T", "transcript_path": "/tmp/T.jsonl", "cwd": "/tmp"}
    # Another Stop hook (not ours) blocked first, so ours runs with stop_hook_active: true
    # in a session it has no state for yet: it must not block (no loop)…
    assert _hook(setup, state, "stop", {**base, "hook_event_name": "Stop",
                                         "stop_hook_active": True}) == ""
    # …but it has not shown the wake-up either, so the session's next prompt must show it.
    out = _hook(setup, state, "prompt", {**base, "hook_event_name": "UserPromptSubmit",
                                          "prompt": "next"}, now=time.time() + 3600)
    assert "@bot please answer" in out, "the wake-up was marked shown without being shown"
