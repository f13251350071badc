"""Review of issue 25 (attack): `agentpost mcp`'s front answers the handshake before the
SDK and the hub client load; a load that then fails must not leave the client with a
listed tool set and a server that dies, unanswered, on the first call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any


def _init(rid: int) -> dict[str, Any]:
    params = {"protocolVersion": "2025-06-18", "capabilities": {},
              "clientInfo": {"name": "t", "version": "1"}}
    return {"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params}


def test_a_hub_url_without_scheme_is_explained_per_call_not_a_dead_server() -> None:
    # A common slip: AGENTPOST_HUB without http:// (checked_hub_url refuses it).
    env = {**os.environ, "AGENTPOST_HUB": "127.0.0.1:8470", "AGENTPOST_TOKEN": "ap_x"}
    frames = [
        _init(1),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "read_inbox", "arguments": {}}},
    ]
    p = subprocess.run(
        [sys.executable, "-m", "agentpost", "mcp"],
        input=b"".join(json.dumps(m).encode() + b"\n" for m in frames),
        capture_output=True, env=env, timeout=60,
    )
    answers = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    ids = [a.get("id") for a in answers]
    assert ids[:2] == [1, 2], "the front answered the handshake and listed the tools"
    # The client was told the server is fine and shown its tools: its first call must get
    # an answer (a tool error naming the hub URL), not a closed pipe and a traceback.
    assert 3 in ids, f"the call was never answered; stderr ends: {p.stderr.decode()[-400:]}"
