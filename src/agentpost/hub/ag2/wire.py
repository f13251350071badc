"""The AG2 relay wire's shapes (docs/architecture.md#ag2-relay-profile, docs/ag2.md), as
`ag2-relay-client` 0.1.0 and `ag2-agent-connect` 0.2.1 send and read them, and the edge translation
of ids: a room is `!<room id>`, a member `@<name>:<workspace>`. Nothing else in the hub sees these
forms.

Inbound shapes ignore fields they do not know: the relay wire is additive-only, with no
version field (the client says so of its task envelope, and sends its own extras)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

import msgspec

from agentpost.core.errors import Code, RequestError
from agentpost.hub.schemas import Attachment, Event
from agentpost.store.ag2 import Task
from agentpost.store.models import Member

WireId = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z0-9._-]{1,64}$")]
# The relay client's room grammar (`markers.ROOM_ID_RE`); only `!` ids name our rooms.
WireRoom = Annotated[str, msgspec.Meta(pattern=r"^[!#][^\s/\x00-\x1f\x7f]{1,254}$")]

ROOM_SIGIL = "!"
_MXID = re.compile(r"^@([a-z0-9][a-z0-9_-]{0,62}):([^\s:@/]+)$")


class TaskOut(msgspec.Struct):
    """One task in `GET /v1/tasks`: the envelope `envelope.parse_task` reads."""

    id: str
    task: str
    timestamp: str
    channel_id: str
    user_id: str
    access_tier: str
    attempt: int
    room_name: str
    sender_name: str
    source_message_id: str
    reply_to_event: str
    sensitive_data_filter: bool
    priority: str = "normal"
    source: str = "agentpost"
    collaborator: bool = False


class TasksOut(msgspec.Struct):
    tasks: list[TaskOut]


class ResultIn(msgspec.Struct):
    """`POST /v1/results`: an answer (`body`), or a dead-letter (`status: rejected`)."""

    id: WireId
    body: Annotated[str, msgspec.Meta(max_length=1_000_000)] | None = None
    status: Literal["rejected"] | None = None
    error_code: Annotated[str, msgspec.Meta(max_length=64)] | None = None


class ResultOut(msgspec.Struct, omit_defaults=True):
    ok: bool
    duplicate: bool
    refused: str | None = None


class RoomOpIn(msgspec.Struct):
    """`POST /v1/room`: `op` message (room_id, body, mentions?), edit (room_id, event_id,
    body), react (room_id, event_id, key), redact (room_id, event_id, reason?)."""

    op: Literal["message", "edit", "react", "redact"]
    room_id: WireRoom
    body: Annotated[str, msgspec.Meta(max_length=65536)] | None = None
    event_id: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    key: Annotated[str, msgspec.Meta(min_length=1, max_length=64)] | None = None
    mentions: Annotated[list[str], msgspec.Meta(max_length=10)] = []
    reason: Annotated[str, msgspec.Meta(max_length=1000)] | None = None


class RoomOpOut(msgspec.Struct):
    ok: bool
    event_id: str


class MediaIn(msgspec.Struct):
    """`POST /v1/rooms/{room}/media` of the relay wire: JSON, the file base64-encoded."""

    content_b64: str
    filename: Annotated[str, msgspec.Meta(min_length=1, max_length=255)]
    caption: Annotated[str, msgspec.Meta(max_length=65536)] | None = None


class MediaOut(msgspec.Struct):
    mxc: str
    event_id: str


MAX_INFLIGHT = 10_000


class HeartbeatIn(msgspec.Struct):
    """`POST /v1/heartbeat`: liveness and a self-description, never an authorization input."""

    client: Annotated[str, msgspec.Meta(max_length=200)] | None = None
    protocol_version: int | None = None
    tier: Annotated[str, msgspec.Meta(max_length=64)] | None = None
    # Tasks in hand: a count, so a negative one (which would free every lease of the
    # agent) or an absurd one is refused as the malformed body it is.
    inflight: Annotated[int, msgspec.Meta(ge=0, le=MAX_INFLIGHT)] | None = None
    capabilities: Annotated[list[str], msgspec.Meta(max_length=64)] = []
    status: Annotated[str, msgspec.Meta(max_length=500)] | None = None
    step: Annotated[str, msgspec.Meta(max_length=500)] | None = None


class AckIn(msgspec.Struct):
    id: str | None = None


def wire_room(room_id: str) -> str:
    return ROOM_SIGIL + room_id


def room_of(wire: str) -> str:
    """Our room id from a wire room id; a `#alias` or bare id names no room of ours."""
    if not wire.startswith(ROOM_SIGIL) or len(wire) < 2:
        raise RequestError(
            Code.ROOM_NOT_FOUND, f"no room {wire!r}: rooms are named !<room id>", field="room_id"
        )
    return wire[len(ROOM_SIGIL) :]


def wire_member(name: str, workspace: str) -> str:
    return f"@{name}:{workspace}"


def mentioned(mxids: list[str], workspace: str) -> list[str]:
    """Member names from `@name:<workspace>` mentions; another form, or another workspace,
    is refused (400 `invalid_request`, field `mentions`)."""
    names = []
    for mxid in mxids:
        found = _MXID.fullmatch(mxid)
        if found is None or found.group(2) != workspace:
            raise RequestError(
                Code.INVALID_REQUEST,
                f"mention {mxid!r} is not @<name>:{workspace}",
                field="mentions",
            )
        names.append(found.group(1))
    return names


def with_mentions(text: str, names: list[str]) -> str:
    """The text, with `@name` added for each mentioned member it does not name yet (the hub
    routes by the mentions in the text)."""
    missing = [n for n in names if f"@{n}" not in text]
    return text if not missing else text + "\n" + " ".join(f"@{n}" for n in missing)


def error_code(raw: str | None) -> str:
    """A dead-letter's `error_code` as shown in the room: letters, digits and `_` only."""
    code = re.sub(r"[^A-Za-z0-9_]", "_", (raw or "").strip())[:64].strip("_")
    return code or "REJECTED"


_KINDS = {"image": "m.image", "audio": "m.audio", "video": "m.video"}


def media_marker(base: str, att: Attachment) -> str:
    """An attachment as the relay client reads one from a task's text:
    `[ag2space-media: <url> mime= name= size= kind=]`, the URL under the profile's base so
    the client fetches it with its bearer. Values are single runs with no `]` (the client
    reads `key=<non-space run>`)."""
    mime = att.mime_type.split(";")[0].strip() or "application/octet-stream"
    name = re.sub(r"[\s\[\]]", "_", att.name) or "file"
    kind = _KINDS.get(mime.split("/")[0], "m.file")
    return (
        f"[ag2space-media: {base}/v1/media/{att.id} mime={mime} name={name}"
        f" size={att.size} kind={kind}]"
    )


def envelope(
    task: Task, ev: Event, *, room_name: str, sensitive: bool, member: Member, base: str
) -> TaskOut:
    """The task as the relay client reads it; `access_tier` is `owner` for the agent's
    owner, else `guest` (the client refuses a guest itself, with its own notice)."""
    text = "\n".join([ev.text, *(media_marker(base, a) for a in ev.attachments)]).strip()
    return TaskOut(
        id=task.event_id,
        task=text,
        timestamp=ev.created_at,
        channel_id=wire_room(ev.room),
        user_id=wire_member(ev.sender, member.workspace_name),
        # By member id (docs/architecture.md#identity): a name freed and taken again owns nothing.
        access_tier="owner"
        if member.owner_id is not None and ev.sender_id == member.owner_id
        else "guest",
        attempt=task.attempt,
        room_name=room_name,
        sender_name=ev.sender,
        source_message_id=ev.id,
        reply_to_event=ev.in_reply_to or "",
        sensitive_data_filter=sensitive,
    )
