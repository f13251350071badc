"""The router for human messages with no mention (docs/delegation.md): policy `none`,
`sole-agent` (default; decided in the transaction, see `route`) or `llm`.

`llm` asks an OpenAI-compatible chat-completions endpoint (`AGENTPOST_ROUTER_URL`,
`AGENTPOST_ROUTER_MODEL`, `AGENTPOST_ROUTER_KEY`) to pick one candidate or `stop`. The ask
happens before the write transaction (a network call must never hold the writer); the
transaction then applies the target gate to the answer. Candidates are live agents of the
room only, before any model sees them. An answer that is not a candidate is `stop`; a
timeout or error is `stop`, logged.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentpost.hub.routing import mentioned_names
from agentpost.store import members, rooms
from agentpost.store.engine import Db
from agentpost.store.models import Member

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("agentpost.hub.routing")

POLICIES = ("none", "sole-agent", "llm")
STOP = "stop"

SYSTEM_PROMPT = (
    "You route a chat message in a team room to at most one AI agent. "
    "Answer with exactly one name from the candidate list, or with the word stop when no "
    "agent should act. Answer with the name only.\n\nCandidates:\n{candidates}"
)


@dataclass(frozen=True)
class LlmSettings:
    url: str
    model: str
    key: str | None
    timeout: float

    @staticmethod
    def from_env() -> LlmSettings | None:
        url = os.environ.get("AGENTPOST_ROUTER_URL")
        if not url:
            return None
        return LlmSettings(
            url=url
            if url.rstrip("/").endswith("/chat/completions")
            else url.rstrip("/") + "/chat/completions",
            model=os.environ.get("AGENTPOST_ROUTER_MODEL", "gpt-4o-mini"),
            key=os.environ.get("AGENTPOST_ROUTER_KEY"),
            timeout=float(os.environ.get("AGENTPOST_ROUTER_TIMEOUT", "10")),
        )


def llm_candidates(db: Db, room_id: str, sender: Member, text: str) -> list[str] | None:
    """The live agents to offer the model, or None when this message needs no router
    (not a human, not an `llm` room in dynamic mode, or it mentions a live member)."""
    if sender.kind != "human":
        return None
    room = rooms.room_by_id(db, room_id)
    if room is None or room.mode != "dynamic" or room.router != "llm":
        return None
    names = [n for n in mentioned_names(text) if n != sender.name]
    if members.live_members_named(db, sender.workspace_id, names):
        return None
    return [m.name for m in rooms.live_agents(db, room_id) if m.name != sender.name]


async def ask_llm(
    settings: LlmSettings, http: httpx.AsyncClient, candidates: list[str], text: str
) -> str:
    """A candidate's name or `stop`."""
    import httpx

    if not candidates:
        return STOP
    headers = {"Authorization": f"Bearer {settings.key}"} if settings.key else {}
    body = {
        "model": settings.model,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT.format(candidates="\n".join(candidates))},
            {"role": "user", "content": text},
        ],
    }
    try:
        resp = await http.post(settings.url, json=body, headers=headers, timeout=settings.timeout)
        resp.raise_for_status()
        answer = str(resp.json()["choices"][0]["message"]["content"])
    except httpx.TimeoutException:
        log.warning("router endpoint timed out after %.1fs: stop", settings.timeout)
        return STOP
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
        log.warning("router endpoint failed (%r): stop", exc)
        return STOP
    name = answer.strip().strip(".").lstrip("@").strip().lower()
    if name in candidates:
        return name
    if name != STOP:
        log.info("router answered %r, not a candidate: stop", answer[:80])
    return STOP


class Outbound:
    """The hub's one client for outbound calls (the llm router), made on first use: httpx
    is a large import that a hub without an `llm` room never needs at start."""

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient()
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
