#!/usr/bin/env python3
"""A purpose-built ACP agent (SDK only) that relays through `_ag2/deliver`: the loop the
cause must bound (docs/delegation.md "Cause"). Asked to relay (the prompt's text holds
"relay"), it delivers a new message into the room — no `in_reply_to`, as every delivery —
that mentions `$RELAY_TO` and asks it to relay on, then ends its Turn with "passed on";
anything else (a receipt's "passed on" above all) it answers "noted".

    relay_agent.py            (the other agent's name in $RELAY_TO)
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any

from acp import PROTOCOL_VERSION, run_agent, text_block, update_agent_message
from acp.schema import AgentCapabilities, InitializeResponse, NewSessionResponse, PromptResponse


class RelayAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.delivery: dict[str, dict[str, Any]] = {}
        self.sent = 0

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        caps = AgentCapabilities(field_meta={"ag2/deliver": True})
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=caps)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = uuid.uuid4().hex
        if isinstance(kwargs.get("ag2/delivery"), dict):
            self.delivery[session_id] = kwargs["ag2/delivery"]
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        said = "".join(b.text for b in prompt if getattr(b, "type", "") == "text")
        text = said.split(": ", 1)[1] if ": " in said else said
        binding = self.delivery.get(session_id)
        if "relay" not in text or binding is None:
            await self.say(session_id, "noted")
            return PromptResponse(stop_reason="end_turn")
        self.sent += 1
        request = {
            "sessionId": session_id,
            "binding": binding["binding"],
            "id": f"relay-{os.getpid()}-{self.sent}",
            "parts": [{"type": "text", "text": f"@{os.environ['RELAY_TO']} please relay on"}],
        }
        meta = kwargs.get("ag2/delivery")
        if isinstance(meta, dict) and meta.get("turn"):  # this Turn's work (docs/deliver.md)
            request["turn"] = meta["turn"]
        for _ in range(20):  # a `retry` is sent again, as the deliver contract says
            result = await self.conn.ext_method("ag2/deliver", request)
            if result.get("status") != "retry":
                break
            await asyncio.sleep(0.2)
        await self.say(session_id, "passed on")
        return PromptResponse(stop_reason="end_turn")

    async def say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(
            session_id=session_id, update=update_agent_message(text_block(text))
        )


if __name__ == "__main__":
    asyncio.run(run_agent(RelayAgent()))
