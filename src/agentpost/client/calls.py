"""The calls of the async client that its helper modules make (client/threads.py,
client/exports.py), as a Protocol: they take the client as a parameter and never import
client/asyncclient.py, which imports them (no import circle)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import httpx

from agentpost.client.models import PostResult, Room


class HubCalls(Protocol):
    """What `AsyncHubClient` offers its helper modules."""

    has_token: bool

    async def request(self, method: str, path: str, **kw: Any) -> httpx.Response: ...

    async def me(self) -> dict[str, Any]: ...

    async def room(self, room_id: str) -> Room: ...

    async def resolve_room(self, room: str) -> str: ...

    async def set_archived(self, room_id: str, archived: bool) -> Room: ...

    async def post_message(
        self,
        room_id: str,
        text: str,
        *,
        key: str | None = None,
        metadata: dict[str, Any] | None = None,
        in_reply_to: str | None = None,
        reply_kind: str | None = None,
        attachments: list[str] | None = None,
        cause: str | None = None,
    ) -> PostResult: ...

    def streamed(
        self, path: str, params: dict[str, str] | None = None
    ) -> AbstractAsyncContextManager[httpx.Response]: ...
