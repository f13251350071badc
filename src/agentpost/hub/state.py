"""The hub's running parts, shared by the routes: engine, wake-ups, keys, blobs, metrics."""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from agentpost.hub.auth import TokenCache
from agentpost.hub.blobs import BlobStore
from agentpost.hub.config import HubConfig
from agentpost.hub.idempotency import Idempotency
from agentpost.hub.metrics import HubMetrics
from agentpost.hub.notify import Notifier
from agentpost.hub.presence import Presence
from agentpost.hub.routing.router import LlmSettings, Outbound
from agentpost.hub.streams import StreamSlots
from agentpost.store.engine import Engine


@dataclass
class Hub:
    config: HubConfig
    engine: Engine
    notifier: Notifier
    idempotency: Idempotency
    blobs: BlobStore
    metrics: HubMetrics
    admin_hash: str
    tokens: TokenCache
    http: Outbound  # outbound calls: the llm router
    router_settings: LlmSettings | None
    streams: StreamSlots
    presence: Presence


def hub_of(request: Request) -> Hub:
    hub: Hub = request.app.state.hub
    return hub
