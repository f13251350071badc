"""File reservations (hub/routes/reservations.py, docs/reservations.md)."""

from __future__ import annotations

from typing import Any

from agentpost.core.errors import Code
from agentpost.hub.openapi.common import (
    AUTH,
    BODY,
    IDEMPOTENCY_KEY,
    MEMBER,
    MEMBER_OR_ADMIN,
    WRITE,
    WS,
    json_content,
    operation,
    path_param,
    query_param,
)

KEYED = [Code.INVALID_IDEMPOTENCY_KEY, Code.IDEMPOTENCY_IN_FLIGHT, Code.IDEMPOTENCY_CONFLICT]
RESERVATION_ID = path_param("reservation", {"type": "string"}, "reservation id")
PROJECT = query_param("project", {"type": "string"}, "only this project's reservations")


def operations() -> dict[str, dict[str, Any]]:
    ws = [*AUTH, Code.NO_WORKSPACE]
    return {
        "/v1/workspaces/{ws}/reservations": {
            "post": operation(
                "reserve_paths",
                (201, json_content("ReservationReply")),
                [*ws, *BODY, *WRITE, *KEYED, Code.RESERVATION_CONFLICT, Code.ROOM_NOT_FOUND]
                + [Code.CHANNEL_MEMBERSHIP_REQUIRED, Code.ROOM_ARCHIVED],
                security=MEMBER,
                params=[WS, IDEMPOTENCY_KEY],
                body="ReserveIn",
            ),
            "get": operation(
                "list_reservations",
                (200, json_content("ReservationList")),
                [*ws, Code.INVALID_REQUEST],
                security=MEMBER,
                params=[WS, PROJECT],
            ),
        },
        "/v1/workspaces/{ws}/reservations/check": {
            "post": operation(
                "check_paths",
                (200, json_content("ConflictList")),
                [*ws, *BODY],
                security=MEMBER,
                params=[WS],
                body="CheckIn",
            )
        },
        "/v1/reservations/{reservation}/renew": {
            "post": operation(
                "renew_reservation",
                (200, json_content("ReservationReply")),
                [*AUTH, *BODY, *WRITE, *KEYED, Code.FORBIDDEN]
                + [Code.RESERVATION_NOT_FOUND, Code.RESERVATION_ENDED],
                security=MEMBER,
                params=[RESERVATION_ID, IDEMPOTENCY_KEY],
                body="RenewIn",
            )
        },
        "/v1/reservations/{reservation}": {
            "delete": operation(
                "release_reservation",
                (200, json_content("ReservationReply")),
                [*AUTH, *WRITE, *KEYED, Code.FORBIDDEN, Code.RESERVATION_NOT_FOUND],
                security=MEMBER_OR_ADMIN,
                params=[RESERVATION_ID, IDEMPOTENCY_KEY],
            )
        },
    }
