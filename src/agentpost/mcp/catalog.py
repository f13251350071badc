"""The tools an MCP client sees (docs/mcp.md "The tools"): names, descriptions, argument
Structs and annotations, and their `tools/list` wire form.

It imports neither the `mcp` SDK nor the hub client, so `agentpost mcp` can list its tools
before either is loaded (front.py); `server.py` and `tools.py` take the same table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from agentpost import __version__
from agentpost.mcp import args as a

SERVER_NAME = "agentpost"
SERVER_VERSION = __version__
INSTRUCTIONS = (
    "agentpost: rooms shared by people and agents. read_inbox shows what woke you (a "
    "delegation waiting for your receipt is marked); answer with reply (reply_kind makes it "
    "a receipt); post_message posts to a room. Pass idempotency_key on anything that must "
    "not happen twice. A failure names `code` and `retryable`: retry only when retryable, "
    "with the same arguments."
)

_KEY_ADVICE = (
    " Pass an idempotency_key for anything that must not happen twice: the same key never "
    "posts twice, even across restarts. Without one, an identical call in this session "
    "replays the first result (delivery `replayed`) instead of posting again."
)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    args: type[msgspec.Struct]
    idempotent: bool = False  # the same call again changes nothing more: idempotentHint
    read_only: bool = False  # changes nothing on the hub at all: readOnlyHint
    posts: bool = False  # puts an event in a room, under an idempotency key


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "post_message",
        "Post a message to a room (by id or name); @name mentions wake members." + _KEY_ADVICE,
        a.PostMessageArgs,
        idempotent=True,
        posts=True,
    ),
    ToolSpec(
        "reply",
        "Reply to an event (sets in_reply_to). With reply_kind (result, error, needs_input, "
        "cancelled) on an event that delegated work to you, the reply is a receipt that wakes "
        "the delegator once." + _KEY_ADVICE,
        a.ReplyArgs,
        idempotent=True,
        posts=True,
    ),
    ToolSpec(
        "send_to_thread",
        "Send a message to a thread, once per idempotency_key (required): the key is bound to "
        "the thread and to you, so the same call again reports the first delivery.",
        a.SendToThreadArgs,
        idempotent=True,
        posts=True,
    ),
    ToolSpec(
        "ensure_thread",
        "Make or find the thread `name` of `owner` (default: you) and return its id; an "
        "archived one comes back unarchived. Safe to call any number of times.",
        a.EnsureThreadArgs,
        idempotent=True,
    ),
    ToolSpec(
        "upload_file",
        "Upload a local file into a room, with an optional caption. Only regular files inside "
        "the server's --allow-root directories, reached without symlinks or `..`." + _KEY_ADVICE,
        a.UploadFileArgs,
        idempotent=True,
        posts=True,
    ),
    ToolSpec(
        # Not read-only: the hub marks what it hands out as `read` in its delivery state.
        "read_inbox",
        "Read your inbox: the events that woke you, each with its cursor, oldest first; "
        "`delegation_waiting` marks a delegation that waits for your receipt. `wait` "
        f"long-polls up to {a.MAX_WAIT_SECONDS:g} s. Reading marks these events `read` in "
        "their delivery state (the sender sees it); acknowledge with ack_inbox.",
        a.ReadInboxArgs,
        idempotent=True,
    ),
    ToolSpec(
        "ack_inbox",
        "Acknowledge your inbox up to `cursor`: those wake-ups are not shown again.",
        a.AckInboxArgs,
        idempotent=True,
    ),
    ToolSpec("list_rooms", "List the rooms you take part in.", a.ListRoomsArgs, read_only=True),
    ToolSpec(
        "read_room",
        "Read a room's events after seq `after`, oldest first; page with `next_after`.",
        a.ReadRoomArgs,
        read_only=True,
    ),
    ToolSpec(
        "delivery_state",
        "Who got an event, per target: queued, read (handed to their client) or acked; and "
        "for the agents it asked, replied (with the reply's kind and event) or pending.",
        a.DeliveryStateArgs,
        read_only=True,
    ),
    ToolSpec(
        "wait_for_receipt",
        "Wait (up to `wait` seconds) until every agent your event delegated to has sent its "
        "receipt (a reply with reply_kind result, error or cancelled), and return them with "
        "their text: `state` replied, or pending when the wait ended first (call again). "
        "Mention an agent with @name in post_message to delegate.",
        a.WaitForReceiptArgs,
        read_only=True,
    ),
    ToolSpec(
        "members",
        "The members of your workspace: kind (human or agent), owner, status, online (seen "
        "by the hub in the last 60 s) and last_seen.",
        a.MembersArgs,
        read_only=True,
    ),
    ToolSpec(
        "search",
        "Search the rooms you take part in, newest first: each hit is an event with "
        "`highlights`, [start, end) character offsets of the match in its text; page with "
        "`next_before` (null: no more).",
        a.SearchArgs,
        read_only=True,
    ),
    ToolSpec(
        "reserve_paths",
        "Reserve files before you change them (docs/reservations.md): gitignore-style globs of "
        "a project, exclusive (default) or shared, for ttl_seconds. Refused with code "
        "reservation_conflict naming each holder, their patterns, reason and until when: then "
        "work elsewhere, wait, or ask them. Release when done." + _KEY_ADVICE,
        a.ReservePathsArgs,
        idempotent=True,
    ),
    ToolSpec(
        "renew_reservation",
        "Hold a reservation of yours ttl_seconds from now (before it expires).",
        a.RenewReservationArgs,
        idempotent=True,
    ),
    ToolSpec(
        "release_reservation",
        "Release a reservation of yours (or of an agent you own) so others may take its files.",
        a.ReleaseReservationArgs,
        idempotent=True,
    ),
    ToolSpec(
        "list_reservations",
        "The live reservations of a project (default: every project): who holds which "
        "patterns, exclusive or shared, until when, and why.",
        a.ListReservationsArgs,
        read_only=True,
    ),
    ToolSpec(
        "check_paths",
        "Before you write files: which of these paths another member holds exclusively "
        "(`conflicts`, naming holder, reason and until when); empty means go ahead.",
        a.CheckPathsArgs,
        read_only=True,
    ),
)
BY_NAME = {t.name: t for t in TOOLS}


def wire_tool(spec: ToolSpec) -> dict[str, Any]:
    """A tool as `tools/list` shows it (camelCase, as the MCP schema names the fields)."""
    return {
        "name": spec.name,
        "description": spec.description,
        "inputSchema": a.input_schema(spec.args),
        "annotations": {
            "readOnlyHint": spec.read_only,
            "destructiveHint": False,
            "idempotentHint": spec.idempotent,
            "openWorldHint": False,
        },
    }
