"""Rows as the hub sees them (docs/api.md). Plain structs, no behaviour."""

from __future__ import annotations

import msgspec


class Workspace(msgspec.Struct, frozen=True):
    id: str
    name: str


class Member(msgspec.Struct, frozen=True):
    id: str
    workspace_id: str
    workspace_name: str
    name: str
    kind: str
    status: str
    owner: str | None  # the owner's name, for people to read
    inbox_cursor: int
    # The owner's member id: what every check of ownership compares (docs/architecture.md#identity).
    owner_id: str | None = None


class Room(msgspec.Struct, frozen=True):
    id: str
    workspace_id: str
    name: str
    kind: str
    mode: str
    master: str | None
    archived: bool
    owner: str | None
    sensitive_filter: bool
    last_seq: int
    router: str = "sole-agent"
    max_delegation_depth: int = 8
    agent_wakeups_per_minute: int = 120
    owner_id: str | None = None  # as Member.owner_id: ownership is compared by id


class KeyRecord(msgspec.Struct, frozen=True):
    """An idempotency record: (member, key) → what the first request got (docs/api.md)."""

    member_id: str
    key: str
    fingerprint: str
    state: str
    status: int
    body: bytes
    room_id: str | None
    event_id: str | None
    created_at: int


class MediaRow(msgspec.Struct, frozen=True):
    id: str
    room_id: str
    sha256: str
    name: str
    mime_type: str
    size: int
    uploader: str
    created_at: int
    redacted: bool = False  # a redaction hid it: its bytes are no longer served
    expired_at: int | None = None  # ms; the room's retention ended it (docs/operations.md)


class Lease(msgspec.Struct, frozen=True):
    """A Worker's lease on an agent member (docs/architecture.md#one-worker-per-agent). Times
    in ms."""

    member_id: str
    fence: int
    worker_id: str
    host: str
    pid: int
    since: int
    renewed_at: int
    expires_at: int
    released: bool


class Reservation(msgspec.Struct, frozen=True):
    """A file reservation (docs/reservations.md): the holder's patterns of a project, held
    until `expires_at` unless ended (`ended_by`: released, forced, expired, removed)."""

    id: str
    workspace_id: str
    project: str
    holder_id: str
    holder: str  # the holder's name, for people to read
    paths: list[str]
    exclusive: bool
    reason: str
    room_id: str | None
    fence: int
    since: int
    renewed_at: int
    expires_at: int
    ended_at: int | None = None
    ended_by: str | None = None
