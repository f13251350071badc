"""A workspace's members as a member sees them (hub/routes/members.py): the list with their
presence (docs/presence.md), and one member."""

from __future__ import annotations

from typing import Any

from agentpost.core.errors import Code
from agentpost.hub.openapi.common import (
    AUTH,
    MEMBER,
    MEMBER_NAME,
    WRITE,
    WS,
    json_content,
    operation,
)


def operations() -> dict[str, dict[str, Any]]:
    return {
        "/v1/workspaces/{ws}/members": {
            "get": operation(
                "workspace_members",
                (200, json_content("PresenceList")),
                [*AUTH, Code.NO_WORKSPACE, *WRITE],
                security=MEMBER,
                params=[WS],
            )
        },
        "/v1/workspaces/{ws}/members/{name}": {
            "get": operation(
                "get_member",
                (200, json_content("MemberReply")),
                [*AUTH, Code.NO_WORKSPACE, Code.MEMBER_NOT_FOUND, Code.NOT_FOUND, *WRITE],
                security=MEMBER,
                params=[WS, MEMBER_NAME],
            )
        },
    }
