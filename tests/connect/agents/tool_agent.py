#!/usr/bin/env python3
"""An ACP agent (SDK only) that runs a tool, for the keeper's time fence tests
(test_agent_fence.py). `tool N` starts a child process, the tool, which works for N
seconds: it appends `<its pid> <time.time_ns()>` to `$TOOL_DIR/ticks` every 20 ms and
writes `$TOOL_DIR/end-<its pid>` once its N seconds of work are done (time it ran while
stopped by SIGSTOP does not count as work). The agent then answers `tool done N`.
At start, with `$TOOL_DIR` set, it writes its pid to `$TOOL_DIR/agent-<n>` (n-th start).
Anything else is answered `tool agent: <text>`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, run_agent, text_block, update_agent_message
from acp.schema import InitializeResponse, NewSessionResponse, PromptResponse

TOOL = """
import os, sys, time
folder, seconds = sys.argv[1], float(sys.argv[2])
worked, last = 0.0, time.monotonic()
while worked < seconds:
    with open(os.path.join(folder, "ticks"), "a") as f:
        f.write(f"{os.getpid()} {time.time_ns()}\\n")
    time.sleep(0.02)
    now = time.monotonic()
    worked += min(now - last, 0.1)  # a stop is no work
    last = now
with open(os.path.join(folder, f"end-{os.getpid()}"), "w") as f:
    f.write(str(time.time_ns()))
"""


class ToolAgent:
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
        answer = f"tool agent: {text}"
        if words[:1] == ["tool"] and len(words) > 1:
            tool = await asyncio.create_subprocess_exec(
                sys.executable, "-c", TOOL, os.environ["TOOL_DIR"], words[1]
            )
            await tool.wait()
            answer = f"tool done {words[1]}"
        await self.conn.session_update(
            session_id=session_id, update=update_agent_message(text_block(answer))
        )
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    folder = os.environ.get("TOOL_DIR")
    if folder:
        n = len(list(Path(folder).glob("agent-*"))) + 1
        (Path(folder) / f"agent-{n}").write_text(str(os.getpid()))
    asyncio.run(run_agent(ToolAgent()))
