"""Rooms (hub/routes/rooms.py): create, list, read and change one, its retention, its
participants, archive. Its events and streams are in `events`, its posts in `messages`."""

from __future__ import annotations

from typing import Any

from agentpost.core.errors import Code
from agentpost.hub.openapi.common import (
    AUTH,
    BODY,
    MEMBER,
    MEMBER_NAME,
    MEMBER_OR_ADMIN,
    ROOM,
    ROOM_ID,
    WRITE,
    WS,
    json_content,
    operation,
)


def operations() -> dict[str, dict[str, Any]]:
    participant = [ROOM_ID, MEMBER_NAME]
    room_codes = [*AUTH, *ROOM, *WRITE]
    return {
        "/v1/workspaces/{ws}/rooms": {
            "post": operation(
                "create_room",
                (201, json_content("RoomReply")),
                [*AUTH, *BODY, Code.NO_WORKSPACE, Code.NOT_FOUND, Code.ROOM_EXISTS, *WRITE],
                security=MEMBER_OR_ADMIN,
                params=[WS],
                body="RoomIn",
            ),
            "get": operation(
                "list_rooms",
                (200, json_content("RoomList")),
                [*AUTH, Code.NO_WORKSPACE, Code.NOT_FOUND, *WRITE],
                security=MEMBER,
                params=[WS],
            ),
        },
        "/v1/rooms/{room}": {
            "get": operation(
                "get_room",
                (200, json_content("RoomReply")),
                room_codes,
                security=MEMBER_OR_ADMIN,
                params=[ROOM_ID],
            ),
            "patch": operation(
                "update_room_settings",
                (200, json_content("RoomReply")),
                [*room_codes, *BODY, Code.FORBIDDEN],
                security=MEMBER_OR_ADMIN,
                params=[ROOM_ID],
                body="RoomSettingsIn",
            ),
        },
        "/v1/rooms/{room}/retention": {
            "get": operation(
                "get_room_retention",
                (200, json_content("RetentionReply")),
                room_codes,
                security=MEMBER_OR_ADMIN,
                params=[ROOM_ID],
            ),
            "put": operation(
                "set_room_retention",
                (200, json_content("RetentionReply")),
                [*room_codes, *BODY, Code.FORBIDDEN],
                security=MEMBER_OR_ADMIN,
                params=[ROOM_ID],
                body="RetentionIn",
            ),
        },
        "/v1/rooms/{room}/participants/{name}": {
            "put": operation(
                "add_participant",
                (200, json_content("RoomReply")),
                [*room_codes, Code.MEMBER_NOT_FOUND],
                security=MEMBER_OR_ADMIN,
                params=participant,
            ),
            "delete": operation(
                "remove_participant",
                (200, json_content("RoomReply")),
                [*room_codes, Code.MEMBER_NOT_FOUND],
                security=MEMBER_OR_ADMIN,
                params=participant,
            ),
        },
        "/v1/rooms/{room}/archive": {
            "post": operation(
                "archive_room",
                (200, json_content("RoomReply")),
                room_codes,
                security=MEMBER_OR_ADMIN,
                params=[ROOM_ID],
            )
        },
        "/v1/rooms/{room}/unarchive": {
            "post": operation(
                "unarchive_room",
                (200, json_content("RoomReply")),
                room_codes,
                security=MEMBER_OR_ADMIN,
                params=[ROOM_ID],
            )
        },
    }
