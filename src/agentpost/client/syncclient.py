"""`HubClient`: the thin sync wrapper over `AsyncHubClient` (docs/architecture.md#client).

It owns a private event loop and runs each async method to completion on it; no logic
lives here, so the two clients cannot drift apart.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncGenerator, Callable, Iterator
from typing import Any, TypeVar

from agentpost.client.asyncclient import AsyncHubClient
from agentpost.client.models import Event, InboxItem

T = TypeVar("T")


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
        return self._iterate(self._async.stream(room_id, after))

    def inbox_stream(self, after: int | None = None) -> Iterator[InboxItem]:
        return self._iterate(self._async.inbox_stream(after))

    def _iterate(self, agen: AsyncGenerator[T, None]) -> Iterator[T]:
        try:
            while True:
                try:
                    yield self._loop.run_until_complete(agen.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            try:
                self._loop.run_until_complete(agen.aclose())
            except RuntimeError:
                # Interrupted inside a step (Ctrl-C): the generator is still "running" and
                # cannot be closed; it is dropped with the loop, nothing is in flight for it.
                pass
