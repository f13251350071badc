"""The hub client: async first, one thin sync wrapper; typed results and errors (§1)."""

from agentpost.client.asyncclient import AsyncHubClient, hub_url_from_env
from agentpost.client.errors import HubError, HubRefused, HubUnavailable, HubUnreachable
from agentpost.client.models import Event, InboxPage, Media, Member, PostResult, Room
from agentpost.client.syncclient import HubClient

__all__ = [
    "AsyncHubClient",
    "Event",
    "HubClient",
    "HubError",
    "HubRefused",
    "HubUnavailable",
    "HubUnreachable",
    "InboxPage",
    "Media",
    "Member",
    "PostResult",
    "Room",
    "hub_url_from_env",
]
