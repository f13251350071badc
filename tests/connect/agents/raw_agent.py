#!/usr/bin/env python3
"""An ACP agent written by hand, frame by frame (no SDK), that answers prompts in shapes
the SDK would never send, for the Worker's Turn-ending tests (tests/connect/
test_turn_endings.py). The first word of the prompt text (after "<sender> in room <room>: ",
mentions skipped) picks the answer:
  badstop     result {"stopReason": 123}        nullresult  result null
  strresult   result "done"                     strerror    error "boom" (a string)
  codeerror   error {"code": "x", "message": 5} listid      an answer with id [1] first
  secret      a text the sensitive-data filter refuses (a cloud access key)
  big N       N chunks of 1 MiB of text, then end_turn
  anything else: "raw: <text>", end_turn
Every prompt first writes `$RAW_MARKER_DIR/prompt-<n>` (its pid inside) when that is set.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any


def send(frame: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(frame) + "\n")
    sys.stdout.flush()


def say(session_id: str, text: str) -> None:
    send(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {
                "sessionId": session_id,
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": text},
                },
            },
        }
    )


def mark() -> None:
    folder = os.environ.get("RAW_MARKER_DIR")
    if folder:
        n = len(list(Path(folder).glob("prompt-*"))) + 1
        (Path(folder) / f"prompt-{n}").write_text(str(os.getpid()))


def prompt(rid: Any, params: dict[str, Any]) -> None:
    mark()
    sid = params["sessionId"]
    said = "".join(b.get("text", "") for b in params.get("prompt", []) if b.get("type") == "text")
    text = said.split(": ", 1)[1] if ": " in said else said
    words = [w for w in text.split() if not w.startswith("@")]
    word = words[0] if words else ""
    answers: dict[str, dict[str, Any]] = {
        "badstop": {"result": {"stopReason": 123}},
        "nullresult": {"result": None},
        "strresult": {"result": "done"},
        "strerror": {"error": "boom"},
        "codeerror": {"error": {"code": "x", "message": 5}},
    }
    if word in answers:
        say(sid, f"about to answer {word}")
        send({"jsonrpc": "2.0", "id": rid, **answers[word]})
        return
    if word == "listid":
        send({"jsonrpc": "2.0", "id": [1], "result": {"stopReason": "end_turn"}})
        say(sid, "after listid")
    elif word == "secret":
        say(sid, "the key is AKIA" + "ABCDEFGHIJKLMNOP")
    elif word == "big":
        chunk = "y" * (1024 * 1024)
        for _ in range(int(words[1])):
            say(sid, chunk)
    else:
        say(sid, f"raw: {text}")
    send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})


def main() -> None:
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": 1,
                                                          "agentCapabilities": {}}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": uuid.uuid4().hex}})
        elif method == "session/prompt":
            prompt(rid, params)
        elif rid is not None and method is not None:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601,
                                                         "message": "Method not found"}})


if __name__ == "__main__":
    main()
