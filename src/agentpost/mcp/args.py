"""The arguments of each MCP tool, as strict msgspec Structs: their JSON Schema is what
`tools/list` shows, and decoding against them is the only argument check (docs/mcp.md).
Unknown fields, wrong types and out-of-range numbers are refused with a clear message, and
so is every id or name not of its shape (core/ids.py): those go into URL paths, and an id
such as `rm_…/archive?` must never reach another route of the hub. Every bound is the hub's
own, refused here rather than clamped, so a call never quietly does less than it asked.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import msgspec

from agentpost.core.ids import (
    EVENT_ID,
    EVENT_ID_RULE,
    IDEMPOTENCY_KEY,
    IDEMPOTENCY_KEY_RULE,
    NAME,
    NAME_RULE,
    ROOM_ID,
    ROOM_ID_RULE,
    schema_pattern,
)
from agentpost.core.thread_key import MAX_KEY_BYTES, InvalidKey, check_key

# The hub's own bounds (docs/api.md): a post's key is 1-255 visible ASCII (it travels in a
# header), a thread send's key 1-255 bytes of UTF-8 (core/thread_key.py), pages of at most
# 1000 events, long polls of at most 60 s, search pages of at most 100 hits.
MAX_WAIT_SECONDS = 60.0
MAX_LIMIT = 1000
MAX_SEARCH_LIMIT = 100
THREAD_KEY_RULE = (
    f"1-{MAX_KEY_BYTES} bytes of UTF-8 (any characters; one outside ASCII takes 2-4 bytes)"
)
# Gemini CLI adds this argument to every tool call it makes (docs/mcp.md "Clients"): the one
# name accepted beyond a tool's own, and ignored.
CLIENT_INJECTED = "wait_for_previous"

ROOM_REF_PATTERN = schema_pattern(re.compile(f"{ROOM_ID.pattern}|{NAME.pattern}"))
ROOM_REF_RULE = f"{ROOM_ID_RULE}, or a room's name ({NAME_RULE.removeprefix('a name: ')})"
EVENT_ID_PATTERN = schema_pattern(EVENT_ID)
NAME_PATTERN = schema_pattern(NAME)
KEY_PATTERN = schema_pattern(IDEMPOTENCY_KEY)
# A refusal says the rule in words, not the regex that checks it.
RULES_IN_WORDS = {
    f"`str` matching regex {ROOM_REF_PATTERN!r}": ROOM_REF_RULE,
    f"`str` matching regex {EVENT_ID_PATTERN!r}": EVENT_ID_RULE,
    f"`str` matching regex {NAME_PATTERN!r}": NAME_RULE,
    f"`str` matching regex {KEY_PATTERN!r}": IDEMPOTENCY_KEY_RULE,
}

RoomRef = Annotated[
    str, msgspec.Meta(pattern=ROOM_REF_PATTERN, description=f"the room: {ROOM_REF_RULE}")
]
Text = Annotated[str, msgspec.Meta(min_length=1, description="the message text")]
_KEY_PROMISE = (
    "the same key again never posts twice, in any session; give one for anything that must "
    "not happen twice"
)
Key = Annotated[
    str,
    msgspec.Meta(
        pattern=KEY_PATTERN,
        description=f"your key for this post ({IDEMPOTENCY_KEY_RULE}): {_KEY_PROMISE}",
    ),
]
# A thread send's key is hashed into its command id (core/thread_key.py), so any text
# fits; the schema can bound characters only, the byte bound is checked on decode.
ThreadKey = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=MAX_KEY_BYTES,
        description=f"your key for this message ({THREAD_KEY_RULE}): {_KEY_PROMISE}",
    ),
]
Cursor = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
ReplyKind = Literal["result", "error", "needs_input", "cancelled"]


class _Args(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    pass


class PostMessageArgs(_Args):
    room: RoomRef
    text: Text
    idempotency_key: Key | None = None


class ReplyArgs(_Args):
    event_id: Annotated[
        str,
        msgspec.Meta(
            pattern=EVENT_ID_PATTERN, description=f"the event you answer: {EVENT_ID_RULE}"
        ),
    ]
    text: Text
    reply_kind: (
        Annotated[
            ReplyKind,
            msgspec.Meta(
                description="how the delegated work ended; makes the reply a receipt when "
                "the event delegated to you"
            ),
        ]
        | None
    ) = None
    idempotency_key: Key | None = None


class SendToThreadArgs(_Args):
    thread: Annotated[
        str,
        msgspec.Meta(pattern=ROOM_REF_PATTERN, description=f"the thread: {ROOM_REF_RULE}"),
    ]
    text: Text
    idempotency_key: ThreadKey

    def __post_init__(self) -> None:
        try:
            check_key(self.idempotency_key)
        except InvalidKey:  # msgspec reports a ValueError here as a ValidationError
            size = len(self.idempotency_key.encode("utf-8", "surrogatepass"))
            raise ValueError(
                f"idempotency_key is {size} bytes; it must be {THREAD_KEY_RULE}"
            ) from None


class EnsureThreadArgs(_Args):
    name: Annotated[
        str, msgspec.Meta(pattern=NAME_PATTERN, description=f"the thread's name: {NAME_RULE}")
    ]
    workspace: (
        Annotated[str, msgspec.Meta(pattern=NAME_PATTERN, description="default: yours")] | None
    ) = None
    owner: Annotated[str, msgspec.Meta(pattern=NAME_PATTERN, description="default: you")] | None = (
        None
    )


class UploadFileArgs(_Args):
    room: RoomRef
    path: Annotated[
        str, msgspec.Meta(min_length=1, description="a file inside an --allow-root directory")
    ]
    caption: Annotated[str, msgspec.Meta(description="text posted with the file")] | None = None
    idempotency_key: Key | None = None


class ReadInboxArgs(_Args):
    after: (
        Annotated[Cursor, msgspec.Meta(description="cursor to read after; default: acked")] | None
    ) = None
    wait: Annotated[
        float,
        msgspec.Meta(
            ge=0,
            le=MAX_WAIT_SECONDS,
            description=f"seconds to wait for a wake-up, 0-{MAX_WAIT_SECONDS:g}",
        ),
    ] = 0.0


class AckInboxArgs(_Args):
    cursor: Annotated[Cursor, msgspec.Meta(description="the cursor read_inbox returned")]


class ListRoomsArgs(_Args):
    pass


class ReadRoomArgs(_Args):
    room: RoomRef
    after: Annotated[Cursor, msgspec.Meta(description="seq to read after; 0: from the start")] = 0
    limit: Annotated[
        int, msgspec.Meta(ge=1, le=MAX_LIMIT, description=f"events per page, 1-{MAX_LIMIT}")
    ] = 100


class DeliveryStateArgs(_Args):
    event_id: Annotated[
        str,
        msgspec.Meta(
            pattern=EVENT_ID_PATTERN,
            description=f"an event of a room you take part in: {EVENT_ID_RULE}",
        ),
    ]


class WaitForReceiptArgs(_Args):
    event_id: Annotated[
        str,
        msgspec.Meta(
            pattern=EVENT_ID_PATTERN,
            description=f"the event that delegated the work (yours): {EVENT_ID_RULE}",
        ),
    ]
    wait: Annotated[
        float,
        msgspec.Meta(
            ge=0,
            le=MAX_WAIT_SECONDS,
            description=f"seconds to wait for the receipts, 0-{MAX_WAIT_SECONDS:g}",
        ),
    ] = 30.0


class MembersArgs(_Args):
    pass


class SearchArgs(_Args):
    query: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            description='words (all must match), "a phrase", word* (a prefix), -word (not it)',
        ),
    ]
    room: RoomRef | None = None
    sender: (
        Annotated[
            str, msgspec.Meta(pattern=NAME_PATTERN, description="only events this member sent")
        ]
        | None
    ) = None
    before: Annotated[
        str | None, msgspec.Meta(description="the next_before of the previous page")
    ] = None
    limit: Annotated[
        int,
        msgspec.Meta(
            ge=1, le=MAX_SEARCH_LIMIT, description=f"hits per page, 1-{MAX_SEARCH_LIMIT}"
        ),
    ] = 20


def input_schema(args: type[msgspec.Struct]) -> dict[str, Any]:
    """The JSON Schema of an arguments Struct, inlined (an object schema, no `$ref`)."""
    (_,), components = msgspec.json.schema_components([args], ref_template="#/$defs/{name}")
    schema: dict[str, Any] = dict(components[args.__name__])
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return schema


# File reservations (docs/reservations.md): the hub's own bounds (hub/schemas.py).
Project = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=300,
        description="the repository: a name, or its normalized origin URL such as "
        "github.com/acme/app (default: the origin of the MCP server's working directory)",
    ),
]
ReserveSeconds = Annotated[int, msgspec.Meta(ge=1, le=7 * 86400, description="seconds to hold")]
ReservationId = Annotated[
    str, msgspec.Meta(pattern=r"^rsv_[0-9A-HJKMNP-TV-Z]{26}$", description="a reservation's id")
]
Patterns = Annotated[
    list[Annotated[str, msgspec.Meta(min_length=1, max_length=512)]],
    msgspec.Meta(
        min_length=1,
        max_length=100,
        description="gitignore-style globs relative to the repository root: src/auth/**, "
        "*.lock, docs/ (a directory covers what is under it)",
    ),
]
RepoPaths = Annotated[
    list[Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]],
    msgspec.Meta(
        min_length=1, max_length=10000, description="file paths relative to the repository root"
    ),
]


class ReservePathsArgs(_Args):
    paths: Patterns
    project: Project | None = None
    exclusive: Annotated[bool, msgspec.Meta(description="alone (default) or shared")] = True
    ttl_seconds: ReserveSeconds = 3600
    reason: Annotated[str, msgspec.Meta(max_length=1024, description="what you will do")] = ""
    room: RoomRef | None = None
    idempotency_key: Key | None = None


class RenewReservationArgs(_Args):
    reservation_id: ReservationId
    ttl_seconds: ReserveSeconds = 3600
    idempotency_key: Key | None = None


class ReleaseReservationArgs(_Args):
    reservation_id: ReservationId
    idempotency_key: Key | None = None


class ListReservationsArgs(_Args):
    project: Project | None = None


class CheckPathsArgs(_Args):
    paths: RepoPaths
    project: Project | None = None
