"""A Worker keeps its agent member online (docs/presence.md): its inbox stream and its
heartbeat; `connect status` shows the Worker's own presence as the hub sees it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

from conftest import Connected, wait_for


def connect_status(c: Connected, *flags: str) -> subprocess.CompletedProcess[str]:
    ws = c.tmp / "ws-bot"
    return subprocess.run(
        [sys.executable, "-m", "agentpost", "connect", "status", "--workspace-dir", str(ws), *flags],
        capture_output=True, text=True, timeout=60, check=True,
    )


def members(c: Connected) -> dict[str, dict[str, Any]]:
    with c.hub.client(c.setup.tokens["alice"]) as h:
        listed = h.get(f"/v1/workspaces/{c.setup.workspace}/members").json()["members"]
        return {m["name"]: m for m in listed}


def test_connect_status_shows_the_workers_presence_as_the_hub_sees_it(
    connected: Connected,
) -> None:
    assert members(connected)["bot"]["last_seen"] is None  # never came before its Worker
    w = connected.worker(env={"AGENTPOST_CONNECT_HEARTBEAT": "0.5"})
    seen = wait_for(lambda: json.loads(connect_status(connected, "--json").stdout)["presence"])
    assert seen["online"] is True and seen["last_seen"]
    assert members(connected)["bot"]["online"] is True
    assert "on the hub: online\tlast seen " in connect_status(connected).stdout
    # The hub stays the judge: a stopped Worker's status keeps what the hub last said.
    w.stop()
    # Heartbeats every 0.5 s are requests; the log holds the Worker's lines, not httpx's.
    assert "agent started" in w.log() and "HTTP Request:" not in w.log()
    assert json.loads(connect_status(connected, "--json").stdout)["running"] is False
    # ... said with its age, and that the Worker is stopped: never "online" as if now.
    said = connect_status(connected).stdout
    assert "on the hub: online" not in said
    assert re.search(r"on the hub \d+ s ago: online\tlast seen \S+\t\(the Worker is stopped", said)
