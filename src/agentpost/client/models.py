"""Typed results of the hub client (mirrors of the hub's wire shapes, docs/api.md)."""

from __future__ import annotations

from typing import Any

import msgspec


class Attachment(msgspec.Struct):
    id: str
    name: str
    mime_type: str
    size: int
    sha256: str


class Reaction(msgspec.Struct):
    """One emoji on an event: who reacted with it (docs/api.md "Relations")."""

    emoji: str
    count: int
    members: list[str]


class Event(msgspec.Struct):
    id: str
    room: str
    seq: int
    sender: str
    sender_kind: str
    type: str
    text: str
    attachments: list[Attachment]
    metadata: dict[str, Any]
    in_reply_to: str | None
    reply_kind: str | None
    targets: list[str]
    created_at: str
    route: str = ""
    # Relations (docs/api.md "Relations"): the target of an edit/reaction/redaction event,
    # and what relations did to this one (latest text, reactions, redacted).
    relates_to: str | None = None
    edited: bool = False
    edited_at: str | None = None
    reactions: list[Reaction] = []
    redacted: bool = False
    # The sender's member id (None for a hub notice, or from a hub before it sent one): the
    # identity to compare, never `sender` (docs/architecture.md#identity).
    sender_id: str | None = None


class Room(msgspec.Struct):
    id: str
    workspace: str
    name: str
    kind: str
    mode: str
    archived: bool
    participants: list[str]
    master: str | None = None
    owner: str | None = None
    last_seq: int = 0
    # How the room routes (docs/delegation.md); None from a hub that does not say.
    router: str | None = None
    sensitive_filter: bool | None = None
    max_delegation_depth: int | None = None
    agent_wakeups_per_minute: int | None = None
    # Your read marker and what is unread past it (docs/api.md "Read markers"); a hub
    # without read markers sends neither, read as 0.
    read_seq: int = 0
    unread: int = 0
    owner_id: str | None = None  # the owner's member id (None: no owner)


class ReadMarker(msgspec.Struct):
    """Where your read marker in a room stands after `mark_read`, and what is unread past
    it: others' events that are not edits, reactions or redactions."""

    room: str
    read_seq: int
    unread: int


class Member(msgspec.Struct):
    id: str
    name: str
    kind: str
    status: str
    owner: str | None = None
    # The owner's member id (None: no owner): what a Worker compares with `Event.sender_id`.
    owner_id: str | None = None


class SeenMember(Member):
    """A member with their presence (docs/presence.md): `online` when the hub saw them in the
    last 60 s, `last_seen` (RFC 3339) or None when never seen."""

    online: bool = False
    last_seen: str | None = None
    worker: dict[str, Any] | None = None  # an agent's Worker lease: host, pid, since, live


class Download(msgspec.Struct):
    """A media file written to disk: its name (from the hub), size and checked sha256."""

    name: str
    size: int
    sha256: str


class NewMember(msgspec.Struct):
    member: Member
    token: str


class Media(msgspec.Struct):
    id: str
    room: str
    name: str
    mime_type: str
    size: int
    sha256: str
    url: str


class PostResult(msgspec.Struct):
    """A post's answer: the event, and for keyed posts `created` or `replayed`."""

    event: Event
    idempotency_status: str | None
    media: Media | None = None


class InboxItem(msgspec.Struct):
    cursor: int
    event: Event


class InboxPage(msgspec.Struct):
    items: list[InboxItem]
    cursor: int


class Thread(msgspec.Struct):
    """The one thread `name` of `owner` (docs/threads.md); `created` when this call made it."""

    thread_id: str
    workspace: str
    name: str
    owner: str
    created: bool


class ThreadSend(msgspec.Struct):
    """A thread send's outcome (docs/threads.md "Sending once"). `delivery`: `sent` (this call
    posted), `replayed` (the hub answered a repeat from its record) or `delivered` (learned from the
    send state)."""

    thread_id: str
    message_id: str
    command_id: str
    delivery: str


class SendState(msgspec.Struct):
    """What the hub recorded for a key (docs/threads.md "Sending once"): `state` created or
    rejected, the stored answer."""

    key: str
    room: str | None
    state: str
    status: int
    event: Event | None
    response: dict[str, Any]
    recorded_at: str
