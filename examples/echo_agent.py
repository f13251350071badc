#!/usr/bin/env python3
"""A small ACP agent written only with the agent-client-protocol SDK, to try
`agentpost connect` with no API key (docs/connect.md).

What it does with a message (the Worker prompts "<sender> in room <room>: <text>";
AG2's agent-connect puts its own "[agent-connect] …" paragraphs before the text, docs/ag2.md;
the first word that is no @mention decides):
- `sleep N …`  waits N seconds before answering (a `/stop` in the room cancels it);
- `file NAME …` writes NAME in its working directory and returns it as a `resource_link`;
- `ask …`       answers with a question: the final message carries
                `_meta["ag2/reply_kind"] = "needs_input"`;
- `later NAME …` answers now, then delivers a file NAME and a text into the room after
                its Turn, with `_ag2/deliver` (docs/deliver.md), under a delivery id of its
                own (each `later` is new work, in any room), sending the same request
                three times as an agent whose answers got lost would, each echoing the
                `turn` of the Turn that asked for it; results are printed on stderr as
                `delivery result: {...}`;
- anything else is echoed back: `echo: <text>`.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import uuid
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, run_agent, text_block, update_agent_message
from acp.helpers import resource_link_block
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
)


class EchoAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.cwd: dict[str, Path] = {}
        self.cancelled: dict[str, asyncio.Event] = {}
        self.delivery: dict[str, dict[str, Any]] = {}
        self.later: set[asyncio.Task[None]] = set()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        # Declaring ag2/deliver: the Worker then hands each Session a binding.
        caps = AgentCapabilities(field_meta={"ag2/deliver": True})
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=caps)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = uuid.uuid4().hex
        self.cwd[session_id] = Path(cwd)
        self.cancelled[session_id] = asyncio.Event()
        if isinstance(kwargs.get("ag2/delivery"), dict):
            self.delivery[session_id] = kwargs["ag2/delivery"]
        return NewSessionResponse(session_id=session_id)

    async def deliver_later(
        self, session_id: str, binding: dict[str, Any], name: str, text: str, work: str
    ) -> None:
        await asyncio.sleep(0.5)  # the work "finishes" after the Turn
        path = Path(binding["export_dir"]) / name
        path.write_text(f"delivered later for: {text}\n")
        request = {
            "sessionId": session_id,
            "binding": binding["binding"],
            # Whose work this is: the `turn` of the Turn that asked for it, never that of
            # whichever Turn runs when it finishes (docs/deliver.md "Whose work it is").
            "turn": binding.get("turn"),
            # One id per piece of work, kept across its resends: an id names one delivery
            # for the Worker's whole ledger, so `later out.txt` asked again (here or in
            # another room) is new work, not a resend of the first (docs/deliver.md).
            "id": f"later-{name}-{work}",
            "parts": [{"type": "file", "path": str(path)}, {"type": "text", "text": f"{name} is ready"}],
        }
        for _ in range(3):  # a resend gets the same answer, never a second post
            result = await self.conn.ext_method("ag2/deliver", request)  # `_ag2/deliver` on the wire
            sys.stderr.write(f"delivery result: {json.dumps(result)}\n")
            sys.stderr.flush()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        if session_id in self.cancelled:
            self.cancelled[session_id].set()

    async def say(self, session_id: str, chunk: AgentMessageChunk) -> None:
        await self.conn.session_update(session_id=session_id, update=chunk)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        said = "".join(b.text for b in prompt if getattr(b, "type", "") == "text")
        text, files = message_of(said)
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
        if words[:1] == ["later"] and len(words) > 1 and re.fullmatch(r"[\w.-]+", words[1]):
            # This Turn's binding and `turn` (the prompt's `_meta`), else the Session's binding.
            binding = kwargs.get("ag2/delivery") or self.delivery.get(session_id)
            if not isinstance(binding, dict):
                await self.say(session_id, update_agent_message(text_block("no binding: cannot deliver")))
                return PromptResponse(stop_reason="end_turn")
            work = uuid.uuid4().hex[:12]
            task = asyncio.create_task(self.deliver_later(session_id, binding, words[1], text, work))
            self.later.add(task)
            task.add_done_callback(self.later.discard)
            await self.say(session_id, update_agent_message(text_block(f"{words[1]} will follow")))
            return PromptResponse(stop_reason="end_turn")
        if words[:1] == ["ask"]:
            question = update_agent_message(text_block("Which one do you mean?"))
            question.field_meta = {"ag2/reply_kind": "needs_input"}
            await self.say(session_id, question)
            return PromptResponse(stop_reason="end_turn", field_meta={"ag2/reply_kind": "needs_input"})
        echo = "\n".join([f"echo: {text}", *files])
        await self.say(session_id, update_agent_message(text_block(echo)))
        return PromptResponse(stop_reason="end_turn")


def message_of(said: str) -> tuple[str, list[str]]:
    """The message in a prompt, and what the prompt's framing says about its files.
    agent-connect's ACP adapter frames it in paragraphs: its "[agent-connect] …" one, then
    "Attached to this message…" ones, then the message as typed."""
    if not said.startswith("[agent-connect] "):
        return (said.split(": ", 1)[1] if ": " in said else said), []
    rest = said.split("\n\n")[1:]
    files = []
    while rest and rest[0].startswith("Attached to this message"):
        files.append(rest.pop(0))
    return "\n\n".join(rest), files


if __name__ == "__main__":
    asyncio.run(run_agent(EchoAgent()))
