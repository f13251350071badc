"""Edits, reactions and redactions (hub/routes/relations.py, docs/api.md "Relations"): keyed
and gated as posts."""

from __future__ import annotations

from typing import Any

from agentpost.core.errors import Code
from agentpost.hub.openapi.common import (
    BODY,
    EVENT_ID,
    IDEMPOTENCY_KEY,
    IDEMPOTENCY_STATUS,
    MEMBER,
    POST,
    ROOM_ID,
    WORKER_FENCE,
    json_content,
    operation,
)


def operations() -> dict[str, dict[str, Any]]:
    refusals = [*BODY, *POST, Code.LEASE_LOST, Code.EVENT_NOT_FOUND, Code.EVENT_REDACTED]
    refusals += [Code.INVALID_RELATION_TARGET]
    params = [ROOM_ID, EVENT_ID, IDEMPOTENCY_KEY, WORKER_FENCE]
    out: dict[str, dict[str, Any]] = {}
    for kind, name, body, own in [
        ("edits", "edit_event", "EditIn", [Code.NOT_EVENT_SENDER]),
        ("reactions", "react_to_event", "ReactionIn", [Code.INVALID_EMOJI, Code.REACTION_LIMIT]),
        ("redactions", "redact_event", "RedactionIn", [Code.NOT_EVENT_SENDER]),
    ]:
        op = operation(
            name,
            (201, {**json_content("EventPosted"), "headers": IDEMPOTENCY_STATUS}),
            [*refusals, *own],
            security=MEMBER,
            params=params,
            body=body,
        )
        # A refusal for content is recorded under the key and replayed with its status
        # (docs/architecture.md#one-key-one-event).
        op["responses"]["422"]["headers"] = IDEMPOTENCY_STATUS
        if kind == "redactions":
            op["requestBody"]["required"] = False  # no body: no reason
        out[f"/v1/rooms/{{room}}/events/{{event}}/{kind}"] = {"post": op}
    return out
