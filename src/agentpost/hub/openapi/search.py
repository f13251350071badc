"""Search (hub/routes/search.py, docs/search.md): the events a member may read, newest first."""

from __future__ import annotations

from typing import Any

from agentpost.core.errors import Code
from agentpost.hub.openapi.common import (
    AUTH,
    INT64_MAX,
    MEMBER,
    json_content,
    operation,
    query_param,
)


def operations() -> dict[str, dict[str, Any]]:
    params = [
        {
            **query_param(
                "q",
                {"type": "string", "minLength": 1, "maxLength": 1000},
                'words (all must match), "a phrase", word* (a prefix), -word or -"a phrase"'
                " (excluded); at most 1000 characters and 16 terms",
            ),
            "required": True,
        },
        query_param("room", {"type": "string"}, "only this room (one you take part in)"),
        query_param("sender", {"type": "string"}, "only events this member sent"),
        query_param("before", {"type": "string"}, "the `next_before` of the previous page"),
        query_param(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": INT64_MAX},
            "default 20, at most 100",
        ),
    ]
    return {
        "/v1/search": {
            "get": operation(
                "search",
                (200, json_content("SearchReply")),
                [*AUTH, Code.SEARCH_QUERY_INVALID, Code.INVALID_REQUEST, Code.ROOM_NOT_FOUND]
                + [Code.CHANNEL_MEMBERSHIP_REQUIRED],
                security=MEMBER,
                params=params,
            )
        },
    }
