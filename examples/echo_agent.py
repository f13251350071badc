#!/usr/bin/env python3
"""A small ACP agent written only with the agent-client-protocol SDK, to try
`agentpost connect` with no API key (docs/connect.md).

What it does with a message (the Worker prompts "<sender> in room <room>: <text>"; the
first word that is no @mention decides):
- `sleep N …`  waits N seconds before answering (a `/stop` in the room cancels it);
- `file NAME …` writes NAME in its working directory and returns it as a `resource_link`;
- `ask …`       answers with a question: the final message carries
                `_meta["ag2/reply_kind"] = "needs_input"`;
- anything else is echoed back: `echo: <text>`.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, run_agent, text_block, update_agent_message
from acp.helpers import resource_link_block
from acp.schema import AgentMessageChunk, InitializeResponse, NewSessionResponse, PromptResponse


class EchoAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.cwd: dict[str, Path] = {}
        self.cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = uuid.uuid4().hex
        self.cwd[session_id] = Path(cwd)
        self.cancelled[session_id] = asyncio.Event()
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if session_id in self.cancelled:
            self.cancelled[session_id].set()

    async def say(self, session_id: str, chunk: AgentMessageChunk) -> None:
        await self.conn.session_update(session_id=session_id, update=chunk)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        said = "".join(b.text for b in prompt if getattr(b, "type", "") == "text")
        text = said.split(": ", 1)[1] if ": " in said else said
        cancelled = self.cancelled[session_id]
        cancelled.clear()
        words = [w for w in text.split() if not w.startswith("@")]  # mentions aside
        if words[:1] == ["sleep"] and len(words) > 1 and re.fullmatch(r"\d+(\.\d+)?", words[1]):
            try:
                await asyncio.wait_for(cancelled.wait(), float(words[1]))
                await self.say(session_id, update_agent_message(text_block("stopped early")))
                return PromptResponse(stop_reason="cancelled")
            except TimeoutError:
                await self.say(session_id, update_agent_message(text_block(f"slept {words[1]}s")))
                return PromptResponse(stop_reason="end_turn")
        if words[:1] == ["file"] and len(words) > 1 and re.fullmatch(r"[\w.-]+", words[1]):
            path = self.cwd[session_id] / words[1]
            path.write_text(f"made by echo_agent for: {text}\n")
            await self.say(session_id, update_agent_message(text_block(f"here is {words[1]}")))
            link = resource_link_block(words[1], path.resolve().as_uri())
            await self.say(session_id, update_agent_message(link))
            return PromptResponse(stop_reason="end_turn")
        if words[:1] == ["ask"]:
            question = update_agent_message(text_block("Which one do you mean?"))
            question.field_meta = {"ag2/reply_kind": "needs_input"}
            await self.say(session_id, question)
            return PromptResponse(stop_reason="end_turn", field_meta={"ag2/reply_kind": "needs_input"})
        await self.say(session_id, update_agent_message(text_block(f"echo: {text}")))
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(run_agent(EchoAgent()))
