#!/usr/bin/env python3
"""A purpose-built ACP agent (SDK only) that can be steered across rooms: it keeps a map
binding → (session, export folder) of every Session it was given, and delivers wherever
a prompt tells it, looking the session up by binding (docs/deliver.md "Whose work it is").
The first word of the prompt text (after "<sender> in room <room>: ", mentions skipped):
  everywhere TEXT      deliver TEXT under every binding it knows, each from the session the
                       binding came with, echoing the `turn` of the Turn it works for now;
                       reply {binding: result} as JSON
  everywhere-bare TEXT the same without `turn` (the seed's wire)
  later TEXT           answer now; deliver TEXT under this Turn's binding, echoing this
                       Turn's `turn`, when a later prompt says `finish` (work that ends after
                       its Turn, whoever's Turn runs then); reply {binding: result}
  finish               deliver every piece of `later` work now
  turn                 reply this prompt's `_meta["ag2/delivery"]` as JSON (the Session's
                       binding when the prompt has none)
anything else: "steered: <text>".
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, run_agent, text_block, update_agent_message
from acp.schema import (
    AgentCapabilities,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
)


class SteeredAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions: dict[str, str] = {}  # binding → the session it came with
        self.bindings: dict[str, str] = {}  # session → its binding
        self.sent = 0
        self.later: list[tuple[str, str | None, str]] = []  # (binding, turn, text)

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        caps = AgentCapabilities(field_meta={"ag2/deliver": True})
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=caps)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = uuid.uuid4().hex
        delivery = kwargs.get("ag2/delivery")
        if isinstance(delivery, dict):
            self.sessions[delivery["binding"]] = session_id
            self.bindings[session_id] = delivery["binding"]
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None

    async def deliver(self, binding: str, turn: str | None, text: str) -> dict[str, Any]:
        self.sent += 1
        request: dict[str, Any] = {
            "sessionId": self.sessions.get(binding, "no-such-session"),
            "binding": binding,
            "id": f"steered-{self.sent}",
            "parts": [{"type": "text", "text": text}],
        }
        if turn is not None:
            request["turn"] = turn
        try:
            result: dict[str, Any] = await self.conn.ext_method("ag2/deliver", request)
        except RequestError as exc:
            return {"error": exc.code}
        return result

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        said = "".join(b.text for b in prompt if getattr(b, "type", "") == "text")
        text = said.split(": ", 1)[1] if ": " in said else said
        words = [w for w in text.split() if not w.startswith("@")]
        word, rest = (words[0], " ".join(words[1:])) if words else ("", "")
        delivery = kwargs.get("ag2/delivery") if isinstance(kwargs.get("ag2/delivery"), dict) else {}
        delivery = {"binding": self.bindings.get(session_id, ""), **delivery}
        turn = delivery.get("turn")
        if word in ("everywhere", "everywhere-bare"):
            echoed = turn if word == "everywhere" else None
            results = {b: await self.deliver(b, echoed, rest) for b in list(self.sessions)}
            out = json.dumps(results, sort_keys=True)
        elif word == "later":
            self.later.append((delivery.get("binding", ""), turn, rest))
            out = "later: noted"
        elif word == "finish":
            done = {b: await self.deliver(b, t, x) for b, t, x in self.later}
            self.later.clear()
            out = json.dumps(done, sort_keys=True)
        elif word == "turn":
            out = json.dumps(delivery, sort_keys=True)
        else:
            out = f"steered: {text}"
        await self.conn.session_update(
            session_id=session_id, update=update_agent_message(text_block(out))
        )
        return PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(run_agent(SteeredAgent()))
