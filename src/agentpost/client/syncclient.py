"""`HubClient`: the thin sync wrapper over `AsyncHubClient` (CONVENTIONS §5).

It owns a private event loop and runs each async method to completion on it; no logic
lives here, so the two clients cannot drift apart.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterator
from typing import Any

from agentpost.client.asyncclient import AsyncHubClient
from agentpost.client.models import Event


class HubClient:
    def __init__(
        self, hub: str | None = None, token: str | None = None, timeout: float = 30.0
    ) -> None:
        self._async = AsyncHubClient(hub, token, timeout)  # a bad hub URL raises here
        self._loop = asyncio.new_event_loop()
        self.hub = self._async.hub

    def __enter__(self) -> HubClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._loop.run_until_complete(self._async.aclose())
        self._loop.close()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self._async, name)
        if not asyncio.iscoroutinefunction(method):
            raise AttributeError(name)

        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            return self._loop.run_until_complete(method(*args, **kwargs))

        return call

    def stream(self, room_id: str, after: int = 0) -> Iterator[Event]:
        agen = self._async.stream(room_id, after)
        try:
            while True:
                try:
                    yield self._loop.run_until_complete(agen.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._loop.run_until_complete(agen.aclose())
