"""Wire shapes of the hub API (docs/api.md), as msgspec Structs.

Requests forbid unknown fields so that what is stored is exactly what was compared.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from agentpost.core.ids import EVENT_ID, EVENT_ID_RULE, NAME, NAME_RULE, schema_pattern

NAME_PATTERN = schema_pattern(NAME)
Name = Annotated[str, msgspec.Meta(pattern=NAME_PATTERN, description=NAME_RULE)]
# `ev_` + a ULID (core/ids.py): an `in_reply_to` of another shape names no event.
EVENT_ID_PATTERN = schema_pattern(EVENT_ID)
EventId = Annotated[str, msgspec.Meta(pattern=EVENT_ID_PATTERN, description=EVENT_ID_RULE)]
# A schema refusal says the rule in words, not the regex that checks it.
RULES_IN_WORDS = {
    f"`str` matching regex {NAME_PATTERN!r}": NAME_RULE,
    f"`str` matching regex {EVENT_ID_PATTERN!r}": EVENT_ID_RULE,
}
ReplyKind = Literal["result", "error", "needs_input", "cancelled"]
# The fences against runaway agent traffic (docs/delegation.md "Depth and budget").
MaxDelegationDepth = Annotated[
    int,
    msgspec.Meta(
        ge=1,
        le=100,
        description="how deep a chain of delegations may go before an agent's mentions "
        "wake no one (route `depth_limit`); 1-100, default 8",
    ),
]
AgentWakeupsPerMinute = Annotated[
    int,
    msgspec.Meta(
        ge=1,
        le=100000,
        description="agent-caused wake-ups per minute before an agent's mentions wake no "
        "one (route `wake_budget`); 1-100000, default 120",
    ),
]
RouterPolicy = Literal["none", "sole-agent", "llm"]


class WorkspaceIn(msgspec.Struct, forbid_unknown_fields=True):
    name: Name


class MemberIn(msgspec.Struct, forbid_unknown_fields=True):
    name: Name
    kind: Literal["agent", "human"]
    owner: Name | None = None


class OwnerIn(msgspec.Struct, forbid_unknown_fields=True):
    """`PUT /v1/admin/workspaces/{ws}/members/{name}/owner`: the agent's owner (null: none)."""

    owner: Name | None


class RoomIn(msgspec.Struct, forbid_unknown_fields=True):
    name: Name
    kind: Literal["channel"] = "channel"
    mode: Literal["dynamic", "master"] = "dynamic"
    master: Name | None = None
    participants: list[Name] = []
    sensitive_filter: bool = False
    router: RouterPolicy = "sole-agent"
    max_delegation_depth: MaxDelegationDepth = 8
    agent_wakeups_per_minute: AgentWakeupsPerMinute = 120


class RoomSettingsIn(msgspec.Struct, forbid_unknown_fields=True):
    """How a room routes (docs/delegation.md); only the fields given change."""

    mode: Literal["dynamic", "master"] | None = None
    master: Name | None = None
    router: RouterPolicy | None = None
    sensitive_filter: bool | None = None
    max_delegation_depth: MaxDelegationDepth | None = None
    agent_wakeups_per_minute: AgentWakeupsPerMinute | None = None


KeepSeconds = Annotated[int, msgspec.Meta(ge=0, le=100 * 366 * 86400)]


class RetentionIn(msgspec.Struct, forbid_unknown_fields=True):
    """How long events and files are kept, in seconds (docs/operations.md "Retention"); only
    the fields given change. 0: for ever; null: on a room, as its workspace; on a workspace,
    for ever."""

    events_seconds: KeepSeconds | None | msgspec.UnsetType = msgspec.UNSET
    media_seconds: KeepSeconds | None | msgspec.UnsetType = msgspec.UNSET


class RetentionEffective(msgspec.Struct):
    """What the sweep applies: the room's own setting, else its workspace's (null: for ever)."""

    events_seconds: int | None
    media_seconds: int | None


class RetentionOut(msgspec.Struct):
    """A room's or a workspace's own settings (as set) and those in effect."""

    events_seconds: int | None
    media_seconds: int | None
    effective: RetentionEffective


class RetentionReply(msgspec.Struct):
    retention: RetentionOut


class MessageIn(msgspec.Struct, forbid_unknown_fields=True):
    text: Annotated[str, msgspec.Meta(max_length=65536)] = ""
    metadata: dict[str, Any] = {}
    in_reply_to: EventId | None = None
    reply_kind: ReplyKind | None = None
    attachments: Annotated[list[str], msgspec.Meta(max_length=32)] = []


class EditIn(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /v1/rooms/{room}/events/{event}/edits`: the event's new text (docs/api.md)."""

    text: Annotated[str, msgspec.Meta(max_length=65536)]


class ReactionIn(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /v1/rooms/{room}/events/{event}/reactions`: add an emoji, or take it back
    (`remove`). The emoji's own rules are checked by hub/relations.py (`invalid_emoji`)."""

    emoji: Annotated[str, msgspec.Meta(max_length=64)]
    remove: bool = False


class RedactionIn(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /v1/rooms/{room}/events/{event}/redactions`: hide the event's text and files."""

    reason: Annotated[str, msgspec.Meta(max_length=1024)] | None = None


class CancelIn(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /v1/rooms/{room}/cancel`: stop the running Turn of `agent` (default: every agent
    of the room), as a person typing `/stop` would (docs/connect.md)."""

    agent: Name | None = None


Fence = Annotated[int, msgspec.Meta(ge=1)]


class AckIn(msgspec.Struct, forbid_unknown_fields=True):
    cursor: Annotated[int, msgspec.Meta(ge=0)]
    # A Worker's ack names its lease (docs/architecture.md#one-worker-per-agent); one of an older
    # lease is refused.
    fence: Fence | None = None


class LeaseIn(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /v1/worker/lease`: a Worker takes its agent's lease (docs/connect.md)."""

    worker_id: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{32}$")]
    host: Annotated[str, msgspec.Meta(min_length=1, max_length=255)]
    pid: Annotated[int, msgspec.Meta(ge=0)]
    takeover: bool = False
    # The fence this Worker's workspace last held: with the same worker id and host, a live
    # lease of that fence is this Worker's own (restarted), taken back without waiting.
    last_fence: Fence | None = None


class FenceIn(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /v1/worker/lease/renew` and `/release`: the holder names its lease."""

    fence: Fence


class Attachment(msgspec.Struct):
    id: str
    name: str
    mime_type: str
    size: int
    sha256: str


class Reaction(msgspec.Struct):
    """One emoji on an event (docs/api.md "Relations"): who reacted with it, in order."""

    emoji: str
    count: int
    members: list[str]


class EventCause(msgspec.Struct):
    """An event's cause: the event its chain began with (`origin`) and the rule that told
    it (`via`: in_reply_to, trigger, wake_up or start)."""

    origin: str
    via: str


class Event(msgspec.Struct):
    """EVENT (docs/api.md); field order is the order served. The fields after `route`
    say what relations did to it (hub/relations.py decides them); an event stored before
    them reads them as their defaults."""

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
    route: str = ""  # why `targets` were woken (docs/delegation.md); more EVENT fields may follow
    relates_to: str | None = None  # the target of an edit, a reaction or a redaction
    edited: bool = False
    edited_at: str | None = None
    reactions: list[Reaction] = []
    redacted: bool = False
    # The sender's member id (null for a hub notice): who sent it, for every check of
    # identity (docs/architecture.md#identity); `sender` is the name people read.
    sender_id: str | None = None
    # Where an agent's event comes from (docs/delegation.md "Cause"): its chain's origin and
    # how the hub knew it; null for a person's own message (an origin itself) and a notice.
    cause: EventCause | None = None


class RoomOut(msgspec.Struct):
    """A room as its caller sees it. `participants` lists softly removed members too (the
    room stream's presence frames list only active ones); `read_seq` and `unread` are the
    caller's read marker and unread count (docs/api.md "Read markers"), 0 for the admin."""

    id: str
    workspace: str
    name: str
    kind: str
    mode: str
    master: str | None
    archived: bool
    owner: str | None
    sensitive_filter: bool
    last_seq: int
    participants: list[str]
    owner_id: str | None = None  # the owner's member id, what ownership is checked by
    router: str = "sole-agent"
    max_delegation_depth: int = 8
    agent_wakeups_per_minute: int = 120
    read_seq: int = 0
    unread: int = 0


class ReadIn(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /v1/rooms/{room}/read`: the caller has read the room up to `seq`."""

    seq: Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


class ReadMarkerOut(msgspec.Struct):
    """The caller's read marker in a room after the move, and what is still unread past it."""

    room: str
    read_seq: int
    unread: int


class MemberOut(msgspec.Struct):
    id: str
    name: str
    kind: str
    status: str
    owner: str | None
    # An agent owner's member id (docs/architecture.md#identity): a Worker compares it with an
    # EVENT's `sender_id`; null when the agent has no owner (or the owner was removed hard).
    owner_id: str | None


class LeaseHolder(msgspec.Struct):
    """A Worker's lease on an agent member (docs/connect.md "One Worker"): where it runs,
    its fencing number, since when, and whether it is live (renewed within the lease)."""

    host: str
    pid: int
    fence: int
    since: str
    renewed_at: str
    expires_at: str
    live: bool


class LeaseOut(LeaseHolder):
    lease_seconds: float


class LeaseTaken(msgspec.Struct):
    lease: LeaseOut
    replaced: LeaseHolder | None  # the live lease this one took over (`takeover`)


class LeaseReply(msgspec.Struct):
    lease: LeaseOut


class LeaseCurrent(msgspec.Struct):
    lease: LeaseHolder | None


class LeaseReleased(msgspec.Struct):
    released: bool


class MemberSeen(MemberOut):
    """A member with their presence (docs/presence.md): `online` when seen in the last 60 s;
    `last_seen` null when never seen."""

    online: bool
    last_seen: str | None
    # An agent's Worker lease (docs/architecture.md#one-worker-per-agent); null when no Worker ever
    # ran.
    worker: LeaseHolder | None = None


class PresenceMember(msgspec.Struct):
    """One active participant in a room stream's presence frame: `online`, `last_seen` and
    `worker` as in the workspace's member list (docs/presence.md)."""

    name: str
    kind: str
    online: bool
    last_seen: str | None
    worker: LeaseHolder | None


class RoomPresence(msgspec.Struct):
    """The `data` of a room stream's `presence` frame (`?presence=1`, docs/api.md): the
    room's active participants by name."""

    members: list[PresenceMember]


class MediaOut(msgspec.Struct):
    id: str
    room: str
    name: str
    mime_type: str
    size: int
    sha256: str
    url: str


class ThreadIn(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /v1/workspaces/{ws}/threads/ensure` (docs/threads.md); `owner` defaults to the caller."""

    name: Name
    owner: Name | None = None


class ThreadOut(msgspec.Struct):
    thread_id: str
    workspace: str
    name: str
    owner: str
    created: bool


class SendOut(msgspec.Struct):
    """Send state (docs/threads.md "Sending once"): the key's record; `response` is the stored
    answer as first sent."""

    key: str
    room: str | None
    state: str
    status: int
    event: msgspec.Raw | None
    response: msgspec.Raw
    recorded_at: str


class TargetState(msgspec.Struct):
    """One target of an event (docs/delivery.md): `queued` | `read` | `acked` | `removed`."""

    member: str
    state: str
    member_status: str
    read_at: str | None
    acked_at: str | None


class ReceiptState(msgspec.Struct):
    """One agent an event asked: `replied` (with the event that replied) or `pending`."""

    member: str
    state: str
    reply_kind: str | None
    receipt_event: str | None
    needs_input: int


class DeliveryOut(msgspec.Struct):
    event_id: str
    room: str
    targets: list[TargetState]
    receipts: list[ReceiptState] | None


# File reservations (docs/reservations.md): patterns are gitignore-style globs relative to
# the repository root (core/globs.py), a project names the repository.
# No control characters; a project has no space at either end, a pattern or path names more
# than the root ("/", "."), and a pattern opening with "!" or "#" (a negation or comment in
# gitignore) must escape it.
_TEXT = r"[^\x00-\x1f\x7f]"
_NAMED = rf"[/.]{_TEXT}*[^/.\x00-\x1f\x7f]{_TEXT}*"
Project = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=300,
        pattern=rf"^[^\x00-\x20\x7f](?:{_TEXT}*[^\x00-\x20\x7f])?$",
        description="a repository: a name, or its normalized origin URL",
    ),
]
PathPattern = Annotated[
    str,
    msgspec.Meta(
        min_length=1, max_length=512, pattern=rf"^(?:[^!#/.\x00-\x1f\x7f]{_TEXT}*|{_NAMED})$"
    ),
]
RepoPath = Annotated[
    str,
    msgspec.Meta(
        min_length=1, max_length=4096, pattern=rf"^(?:[^/.\x00-\x1f\x7f]{_TEXT}*|{_NAMED})$"
    ),
]
ReserveSeconds = Annotated[int, msgspec.Meta(ge=1, le=7 * 86400)]


class ReserveIn(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /v1/workspaces/{ws}/reservations`: hold these patterns of a project."""

    project: Project
    paths: Annotated[list[PathPattern], msgspec.Meta(min_length=1, max_length=100)]
    exclusive: bool = True
    ttl_seconds: ReserveSeconds = 3600
    reason: Annotated[str, msgspec.Meta(max_length=1024)] = ""
    room: str | None = None  # the room id that announces its grant and its end


class RenewIn(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /v1/reservations/{id}/renew`: hold it `ttl_seconds` from now."""

    ttl_seconds: ReserveSeconds = 3600


class CheckIn(msgspec.Struct, forbid_unknown_fields=True):
    """`POST /v1/workspaces/{ws}/reservations/check`: concrete paths about to be written."""

    project: Project
    paths: Annotated[list[RepoPath], msgspec.Meta(min_length=1, max_length=10000)]


class ReservationOut(msgspec.Struct):
    id: str
    project: str
    paths: list[str]
    exclusive: bool
    holder: str
    holder_id: str
    fence: int
    reason: str
    room: str | None
    since: str
    renewed_at: str
    expires_at: str
    # held, or how it ended: released, forced, expired, removed, worker_gone
    state: str
    ended_at: str | None = None


class ReservationReply(msgspec.Struct):
    reservation: ReservationOut


class ReservationList(msgspec.Struct):
    reservations: list[ReservationOut]


class ReservationConflictOut(msgspec.Struct):
    """One reservation of another member in the way: the holder, its patterns that collide
    (`paths`), and which of the asked patterns or paths they collide with (`requested`)."""

    id: str
    holder: str
    holder_id: str
    paths: list[str]
    requested: list[str]
    exclusive: bool
    reason: str
    expires_at: str


class ConflictList(msgspec.Struct):
    conflicts: list[ReservationConflictOut]
