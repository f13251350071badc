#!/usr/bin/env python3
"""An ACP agent written by hand (no SDK) that behaves as the maintained adapters do at the
edges the Worker must hold (docs/architecture.md#agent-modes),
for tests/connect/test_agent_modes.py. Set by its environment:
  MODE_AGENT_MODES   the modes it advertises, its first the one sessions open in
                     (default "auto,default,acceptEdits", like claude-agent-acp 0.101)
  MODE_AGENT_AUTH=1  it lists authMethods (codex-acp's) and answers session/new with
                     -32000 auth_required until `authenticate` with `api-key` and a key in
                     OPENAI_API_KEY or CODEX_API_KEY
  MODE_AGENT_PROTOCOL=2  it refuses initialize of v1 (-32022, like CLAUDE_AGENT_ACP_PROTOCOL=v2)
  MODE_AGENT_CALLS   a file each request's method is appended to
A prompt is answered: a `notice` update, the text "mode: <its mode>" (message m1), Claude
Code's warning as message text for clients without notices (`_meta.claudeCode`), a
codex-style "Warning:" line as a `notice`, then "second message" (message m2).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from typing import Any

MODES = os.environ.get("MODE_AGENT_MODES", "auto,default,acceptEdits").split(",")
current: dict[str, str] = {}
authenticated = False


def send(frame: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


def update(sid: str, body: dict[str, Any]) -> None:
    send({"jsonrpc": "2.0", "method": "session/update",
          "params": {"sessionId": sid, "update": body}})


def chunk(sid: str, text: str, message_id: str | None, meta: dict[str, Any] | None = None) -> None:
    body: dict[str, Any] = {"sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": text}}
    if message_id:
        body["messageId"] = message_id
    if meta:
        body["_meta"] = meta
    update(sid, body)


def answer(rid: Any, result: Any = None, error: dict[str, Any] | None = None) -> None:
    send({"jsonrpc": "2.0", "id": rid, **({"error": error} if error else {"result": result})})


def handle(method: str, rid: Any, params: dict[str, Any]) -> None:
    global authenticated
    calls = os.environ.get("MODE_AGENT_CALLS")
    if calls:
        with open(calls, "a") as f:
            f.write(json.dumps({"method": method, "params": params}) + "\n")
    if method == "initialize":
        if os.environ.get("MODE_AGENT_PROTOCOL") == "2":
            answer(rid, error={"code": -32022, "message": "Unsupported protocol version",
                               "data": {"requested": params.get("protocolVersion"),
                                        "supported": [2]}})
            return
        result: dict[str, Any] = {"protocolVersion": 1, "agentCapabilities": {}}
        if os.environ.get("MODE_AGENT_AUTH") == "1":
            result["authMethods"] = [
                {"id": "chat-gpt", "name": "ChatGPT"},
                {"id": "api-key", "name": "API Key", "_meta": {"api-key": {"provider": "openai"}}},
            ]
        answer(rid, result)
    elif method == "authenticate":
        key = os.environ.get("CODEX_API_KEY") or os.environ.get("OPENAI_API_KEY")
        if params.get("methodId") == "api-key" and key:
            authenticated = True
            answer(rid, {})
        else:
            answer(rid, error={"code": -32000, "message": "Authentication required"})
    elif method == "session/new":
        if os.environ.get("MODE_AGENT_AUTH") == "1" and not authenticated:
            answer(rid, error={"code": -32000, "message": "Authentication required"})
            return
        sid = uuid.uuid4().hex
        current[sid] = MODES[0]
        answer(rid, {"sessionId": sid, "modes": {
            "currentModeId": MODES[0],
            "availableModes": [{"id": m, "name": m.title()} for m in MODES],
        }})
    elif method == "session/set_mode":
        if params.get("modeId") not in MODES:
            answer(rid, error={"code": -32602, "message": "Invalid params"})
            return
        current[params["sessionId"]] = params["modeId"]
        answer(rid, {})
    elif method == "session/prompt":
        sid = params["sessionId"]
        update(sid, {"sessionUpdate": "notice", "severity": "warning",
                     "title": "Auto mode is changing", "description": "read the notes"})
        chunk(sid, "mode: ", "m1")
        chunk(sid, current[sid], "m1")
        chunk(sid, "**Warning:** We're changing auto mode", None,
              {"claudeCode": {"kind": "informational", "level": "warning"}})
        update(sid, {"sessionUpdate": "notice", "severity": "warning",
                     "title": "Model metadata for `gw-model` not found."})
        chunk(sid, "second message", "m2")
        answer(rid, {"stopReason": "end_turn"})
    elif rid is not None:
        answer(rid, error={"code": -32601, "message": "Method not found"})


def main() -> None:
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method = msg.get("method")
        if isinstance(method, str):
            handle(method, msg.get("id"), msg.get("params") or {})


if __name__ == "__main__":
    main()
