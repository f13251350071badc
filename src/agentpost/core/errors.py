"""The errors every layer shares: one stable `code` each, one remedy for the caller.

Hierarchy::

    AgentpostError            code, message, extra fields for the JSON body
    ├── RequestError          the request itself is wrong (400/404/409/413/422): fix it
    ├── AuthError             401/403: a credential or membership problem
    └── StorageUnavailable    503: the database cannot take writes now; retry later

The hub maps codes to HTTP statuses in one function (`hub/errors.py`).
"""

from __future__ import annotations

from enum import StrEnum


class Code(StrEnum):
    """Stable error codes of the hub API (docs/api.md)."""

    INVALID_JSON = "invalid_json"
    INVALID_REQUEST = "invalid_request"
    INVALID_IDEMPOTENCY_KEY = "invalid_idempotency_key"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    AGENT_REMOVED = "agent_removed"
    MEMBER_REMOVED = "member_removed"
    CHANNEL_MEMBERSHIP_REQUIRED = "channel_membership_required"
    NOT_FOUND = "not_found"
    ROOM_NOT_FOUND = "room_not_found"
    NO_WORKSPACE = "no_workspace"
    MEMBER_NOT_FOUND = "member_not_found"
    MEDIA_NOT_FOUND = "media_not_found"
    EVENT_NOT_FOUND = "event_not_found"
    SEARCH_QUERY_INVALID = "search_query_invalid"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    WORKSPACE_EXISTS = "workspace_exists"
    MEMBER_EXISTS = "member_exists"
    ROOM_EXISTS = "room_exists"
    ROOM_ARCHIVED = "room_archived"
    THREAD_CONFLICT = "thread_conflict"
    SEND_NOT_FOUND = "send_not_found"
    TASK_NOT_FOUND = "task_not_found"
    NOT_LEASED = "not_leased"
    IDEMPOTENCY_IN_FLIGHT = "idempotency_in_flight"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    COMMAND_REJECTED = "command_rejected"
    INVALID_EMOJI = "invalid_emoji"
    NOT_EVENT_SENDER = "not_event_sender"
    INVALID_RELATION_TARGET = "invalid_relation_target"
    EVENT_REDACTED = "event_redacted"
    REACTION_LIMIT = "reaction_limit"
    MEDIA_REDACTED = "media_redacted"
    MEDIA_EXPIRED = "media_expired"
    MEDIA_MISSING = "media_missing"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    TOO_MANY_STREAMS = "too_many_streams"
    LEASE_HELD = "lease_held"
    LEASE_LOST = "lease_lost"
    RESERVATION_CONFLICT = "reservation_conflict"
    RESERVATION_NOT_FOUND = "reservation_not_found"
    RESERVATION_ENDED = "reservation_ended"
    STORAGE_UNAVAILABLE = "storage_unavailable"
    # Operations on a data home (agentpost db …, docs/operations.md).
    SCHEMA_TOO_NEW = "schema_too_new"
    TARGET_EXISTS = "target_exists"
    TARGET_NOT_EMPTY = "target_not_empty"
    BACKUP_INVALID = "backup_invalid"
    TOOL_MISSING = "tool_missing"
    TOOL_FAILED = "tool_failed"
    BUSY = "busy"
    INTERNAL = "internal"


class AgentpostError(Exception):
    """Base of all agentpost errors: a stable `code`, a human `message`, extra body fields."""

    def __init__(self, code: Code, message: str, **extra: object) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, object]:
        """The JSON error body `{"error": {"code", "message", ...extra}}`."""
        return {"error": {"code": str(self.code), "message": self.message, **self.extra}}


class RequestError(AgentpostError):
    """The request is wrong or not possible as asked; sending it again unchanged won't help."""


class AuthError(AgentpostError):
    """The credential is missing or bad, or the member may not do this."""


class StorageUnavailable(AgentpostError):
    """The store cannot commit now (disk full, read-only, connection lost): retry later."""

    def __init__(self, message: str = "storage is unavailable; nothing was written") -> None:
        super().__init__(Code.STORAGE_UNAVAILABLE, message)
