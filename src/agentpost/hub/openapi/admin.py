"""The admin's routes (hub/routes/admin.py): workspaces, their members, tokens, owners and
retention. Exports are in `export`."""

from __future__ import annotations

from typing import Any

from agentpost.core.errors import Code
from agentpost.hub.openapi.common import (
    ADMIN,
    BODY,
    MEMBER_NAME,
    WRITE,
    WS,
    json_content,
    operation,
    query_param,
)


def operations() -> dict[str, dict[str, Any]]:
    return {
        "/v1/admin/workspaces": {
            "post": operation(
                "create_workspace",
                (201, json_content("WorkspaceReply")),
                [Code.UNAUTHORIZED, *BODY, Code.WORKSPACE_EXISTS, *WRITE],
                security=ADMIN,
                body="WorkspaceIn",
            ),
            "get": operation(
                "list_workspaces",
                (200, json_content("WorkspaceList")),
                [Code.UNAUTHORIZED, *WRITE],
                security=ADMIN,
            ),
        },
        "/v1/admin/workspaces/{ws}/members": {
            "post": operation(
                "add_member",
                (201, json_content("MemberCreated")),
                [Code.UNAUTHORIZED, *BODY, Code.NO_WORKSPACE, Code.NOT_FOUND]
                + [Code.MEMBER_EXISTS, *WRITE],
                security=ADMIN,
                params=[WS],
                body="MemberIn",
            ),
            "get": operation(
                "list_members",
                (200, json_content("MemberList")),
                [Code.UNAUTHORIZED, Code.NO_WORKSPACE, Code.NOT_FOUND, *WRITE],
                security=ADMIN,
                params=[WS],
            ),
        },
        "/v1/admin/workspaces/{ws}/retention": {
            "get": operation(
                "get_workspace_retention",
                (200, json_content("RetentionReply")),
                [Code.UNAUTHORIZED, Code.NO_WORKSPACE, Code.NOT_FOUND, *WRITE],
                security=ADMIN,
                params=[WS],
            ),
            "put": operation(
                "set_workspace_retention",
                (200, json_content("RetentionReply")),
                [Code.UNAUTHORIZED, *BODY, Code.NO_WORKSPACE, Code.NOT_FOUND, *WRITE],
                security=ADMIN,
                params=[WS],
                body="RetentionIn",
            ),
        },
        "/v1/admin/workspaces/{ws}/members/{name}/token": {
            "post": operation(
                "reissue_token",
                (200, json_content("MemberCreated")),
                [Code.UNAUTHORIZED, Code.NO_WORKSPACE, Code.MEMBER_NOT_FOUND, Code.NOT_FOUND]
                + [Code.AGENT_REMOVED, Code.MEMBER_REMOVED, *WRITE],
                security=ADMIN,
                params=[WS, MEMBER_NAME],
            )
        },
        "/v1/admin/workspaces/{ws}/members/{name}/owner": {
            "put": operation(
                "set_owner",
                (200, json_content("MemberOwnerSet")),
                [Code.UNAUTHORIZED, *BODY, Code.NO_WORKSPACE, Code.MEMBER_NOT_FOUND]
                + [Code.NOT_FOUND, Code.AGENT_REMOVED, Code.MEMBER_REMOVED, *WRITE],
                security=ADMIN,
                params=[WS, MEMBER_NAME],
                body="OwnerIn",
            )
        },
        "/v1/admin/workspaces/{ws}/members/{name}": {
            "delete": operation(
                "remove_member",
                (200, json_content("MemberRemoved")),
                [Code.UNAUTHORIZED, Code.INVALID_REQUEST, Code.NO_WORKSPACE]
                + [Code.MEMBER_NOT_FOUND, Code.NOT_FOUND, *WRITE],
                security=ADMIN,
                params=[
                    WS,
                    MEMBER_NAME,
                    query_param("hard", {"type": "boolean"}, "also delete the member's tokens"),
                ],
            )
        },
    }
