"""The hub client: async first, one thin sync wrapper; typed results and errors
(docs/architecture.md#client)."""

from agentpost.client.asyncclient import AsyncHubClient, hub_url_from_env
from agentpost.client.errors import HubError, HubRefused, HubUnavailable, HubUnreachable
from agentpost.client.models import (
    Event,
    InboxItem,
    InboxPage,
    Media,
    Member,
    PostResult,
    Reaction,
    ReadMarker,
    Room,
    SeenMember,
    SendState,
    Thread,
    ThreadSend,
)
from agentpost.client.syncclient import HubClient
from agentpost.client.threads import SEND_CODES, SendCode

__all__ = [
    "AsyncHubClient",
    "Event",
    "HubClient",
    "HubError",
    "HubRefused",
    "HubUnavailable",
    "HubUnreachable",
    "InboxItem",
    "InboxPage",
    "Media",
    "Member",
    "PostResult",
    "Reaction",
    "ReadMarker",
    "Room",
    "SEND_CODES",
    "SeenMember",
    "SendCode",
    "SendState",
    "Thread",
    "ThreadSend",
    "hub_url_from_env",
]
