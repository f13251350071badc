#!/usr/bin/env python3
"""An ACP agent (SDK only) whose processes outlive what they should, like a real adapter
with tools, for the Worker's process tests (test_agent_processes.py).

At start, with `$STUBBORN_DIR` set, generation n (the n-th start) writes
`agent-<n>.json`: its pid, its parent's pid, and which children of earlier generations are
still alive at that moment. Then it starts two children that ignore SIGTERM and SIGHUP and
append a line to `$STUBBORN_DIR/ticks` every 20 ms: one stays in the agent's process group,
the other leaves it (`setsid`); their pids go to `children-<n>.txt`. When its stdin closes
the agent does not exit (as the Codex and Claude adapters do not): it sleeps for ever.
Prompts: `crash` exits at once (code 3); `bigframe` writes a 17 MB line to stdout;
anything else is answered `stubborn: <text>`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, run_agent, text_block, update_agent_message
from acp.schema import InitializeResponse, NewSessionResponse, PromptResponse

CHILD = """
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
if sys.argv[2] == "escape":
    os.setsid()
while True:
    with open(sys.argv[1], "a") as f:
        f.write(f"{os.getpid()}\\n")
    time.sleep(0.02)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return data[data.rindex(b")") + 2 :].split()[0] not in (b"Z", b"X")


def start_children(folder: Path) -> None:
    generation = len(list(folder.glob("agent-*.json"))) + 1
    earlier = [
        int(line)
        for f in folder.glob("children-*.txt")
        for line in f.read_text().split()
    ]
    record = {
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "earlier_alive": [p for p in earlier if alive(p)],
    }
    (folder / f"agent-{generation}.json.tmp").write_text(json.dumps(record))
    children = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(folder / "ticks"), mode])
        for mode in ("stay", "escape")
    ]
    (folder / f"children-{generation}.txt").write_text(
        "".join(f"{c.pid}\n" for c in children)
    )
    os.replace(folder / f"agent-{generation}.json.tmp", folder / f"agent-{generation}.json")


class StubbornAgent:
    def __init__(self) -> None:
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id=uuid.uuid4().hex)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        said = "".join(b.text for b in prompt if getattr(b, "type", "") == "text")
        text = said.split(": ", 1)[1] if ": " in said else said
        words = [w for w in text.split() if not w.startswith("@")]
        if words[:1] == ["crash"]:
            os._exit(3)
        if words[:1] == ["bigframe"]:
            os.set_blocking(1, True)
            os.write(1, b'{"jsonrpc": "2.0", "method": "x", "params": "')
            for _ in range(17):
                os.write(1, b"x" * (1024 * 1024))
            os.write(1, b'"}\n')
        await self.conn.session_update(
            session_id=session_id, update=update_agent_message(text_block(f"stubborn: {text}"))
        )
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    folder = os.environ.get("STUBBORN_DIR")
    if folder:
        start_children(Path(folder))
    try:
        asyncio.run(run_agent(StubbornAgent()))
    except BaseException:  # noqa: S110 - whatever ended the connection, stay
        pass
    while True:  # stdin closed: stay, as the Codex and Claude adapters do
        time.sleep(3600)
