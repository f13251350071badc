"""Exports (hub/routes/export.py, docs/api.md "Export"): streamed JSONL or Markdown, as an
attachment; a workspace's files one by one."""

from __future__ import annotations

from typing import Any

from agentpost.core.errors import Code
from agentpost.hub.openapi.common import (
    ADMIN,
    AUTH,
    MEDIA_ID,
    MEMBER,
    ROOM,
    ROOM_ID,
    WRITE,
    WS,
    operation,
    query_param,
)


def operations() -> dict[str, dict[str, Any]]:
    disposition = {
        "Content-Disposition": {
            "required": True,
            "schema": {"type": "string", "pattern": "^attachment;"},
        }
    }
    jsonl = {"application/x-ndjson": {"schema": {"type": "string"}}}
    room_export = {"content": {**jsonl, "text/markdown": {"schema": {"type": "string"}}}}
    params = [
        ROOM_ID,
        query_param(
            "format",
            {"type": "string", "enum": ["jsonl", "md"]},
            "jsonl (default): a header line, each event as the events API serves it, the"
            " receipts of events that asked agents, an end line; md: a Markdown transcript",
        ),
        query_param(
            "files",
            {"type": "string", "enum": ["paths", "embed"]},
            "paths (default): each attachment gains `path` (files/<media id>-<name>); embed"
            " (jsonl only): `content_base64`, refused (413) when the room's files total more"
            " than 4 × the hub's max upload bytes",
        ),
    ]
    download = {
        "content": {"*/*": {"schema": {}}},
        "headers": {
            **disposition,
            "X-Content-SHA256": {
                "required": True,
                "schema": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            },
        },
    }
    return {
        "/v1/rooms/{room}/export": {
            "get": operation(
                "export_room",
                (200, {**room_export, "headers": disposition}),
                [*AUTH, *ROOM, *WRITE, Code.INVALID_REQUEST, Code.PAYLOAD_TOO_LARGE]
                + [Code.TOO_MANY_STREAMS],
                security=MEMBER,
                params=params,
            )
        },
        "/v1/admin/workspaces/{ws}/export": {
            "get": operation(
                "export_workspace",
                (200, {"content": jsonl, "headers": disposition}),
                [Code.UNAUTHORIZED, Code.NO_WORKSPACE, Code.NOT_FOUND, Code.TOO_MANY_STREAMS]
                + WRITE,
                security=ADMIN,
                params=[WS],
            )
        },
        "/v1/admin/workspaces/{ws}/media/{media}": {
            "get": operation(
                "export_workspace_media",
                (200, download),
                [Code.UNAUTHORIZED, Code.NO_WORKSPACE, Code.MEDIA_NOT_FOUND, Code.NOT_FOUND]
                + [Code.MEDIA_REDACTED, Code.MEDIA_EXPIRED, Code.MEDIA_MISSING, *WRITE],
                security=ADMIN,
                params=[WS, MEDIA_ID],
            )
        },
    }
