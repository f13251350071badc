"""What each MCP tool does (docs/mcp.md), in the glossary's words, through the hub client.

`Toolbox.call(name, arguments)` returns a result (a JSON object with `delivery` and the ids
for posts) or a `ToolFailure` (code, message, retryable); it raises only `UnknownTool`, a
protocol error rather than a tool's failure (the MCP spec's -32602). Posting
tools send a key on every post (`keys.py`), so a retried call replays and never posts twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import mimetypes
import os
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec

from agentpost.client import AsyncHubClient, Event, HubError, PostResult
from agentpost.egress import OUTSIDE_ROOTS as NO_ROOTS
from agentpost.egress import EgressRefused, EgressRoots
from agentpost.mcp import args as a
from agentpost.mcp import keys
from agentpost.mcp.catalog import BY_NAME, ToolSpec
from agentpost.mcp.failures import (
    INTERNAL,
    INVALID_ARGUMENTS,
    ToolFailure,
    UnknownTool,
    from_egress,
    from_hub,
    no_token,
)
from agentpost.repo import origin_project

log = logging.getLogger("agentpost.mcp")

SENT = "sent"
NOT_A_DELEGATION = "not_a_delegation"
RECEIPT_POLL_FIRST = 0.1  # seconds between asks of wait_for_receipt, doubling up to:
RECEIPT_POLL_MAX = 1.0
REPLAYED = "replayed"
REPLAY_NOTE = (
    "An identical call was already made in this session, so nothing was posted again. "
    "If you meant a second, identical message, call again with your own idempotency_key."
)


Handler = Callable[[Any], Awaitable[dict[str, Any]]]


_AT_FIELD = re.compile(r"at `\$\.([a-z_]+)`$")


def _invalid(exc: msgspec.ValidationError, spec: ToolSpec) -> ToolFailure:
    said = str(exc)
    for regex, words in a.RULES_IN_WORDS.items():
        said = said.replace(regex, words)
    field = _AT_FIELD.search(said)
    if field is not None:  # a number out of range: say the whole range, not one end
        prop = a.input_schema(spec.args)["properties"].get(field.group(1), {})
        if "minimum" in prop and "maximum" in prop:
            said += f" ({field.group(1)} must be {prop['minimum']:g}-{prop['maximum']:g})"
    return ToolFailure(INVALID_ARGUMENTS, f"{spec.name}: {said}; nothing was done")


def _without_injected(arguments: object) -> object:
    """The arguments without the one a client adds on its own (args.CLIENT_INJECTED), when
    it is a boolean; anything else under that name is refused as an unknown field."""
    if isinstance(arguments, dict) and isinstance(arguments.get(a.CLIENT_INJECTED), bool):
        return {k: v for k, v in arguments.items() if k != a.CLIENT_INJECTED}
    return arguments


def _event_out(ev: Event) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(ev)
    return out


class Toolbox:
    """The tools of one MCP server process, acting as the member of its hub client."""

    def __init__(
        self,
        hub: AsyncHubClient,
        roots: EgressRoots,
        session_id: str | None = None,
        refused: ToolFailure | None = None,
    ):
        self.hub = hub
        self.roots = roots
        # Why no call can act as a member (a token file that could not be used): every
        # call answers it, so the client still starts and lists the tools.
        self.refused = refused
        self.session_id = session_id or keys.new_session_id()
        self._me: dict[str, Any] | None = None
        self._handlers: dict[str, Handler] = {
            "post_message": self.post_message,
            "reply": self.reply,
            "send_to_thread": self.send_to_thread,
            "ensure_thread": self.ensure_thread,
            "upload_file": self.upload_file,
            "read_inbox": self.read_inbox,
            "ack_inbox": self.ack_inbox,
            "list_rooms": self.list_rooms,
            "read_room": self.read_room,
            "delivery_state": self.delivery_state,
            "wait_for_receipt": self.wait_for_receipt,
            "members": self.members,
            "search": self.search,
            "reserve_paths": self.reserve_paths,
            "renew_reservation": self.renew_reservation,
            "release_reservation": self.release_reservation,
            "list_reservations": self.list_reservations,
            "check_paths": self.check_paths,
        }

    async def call(self, name: str, arguments: object) -> dict[str, Any] | ToolFailure:
        spec = BY_NAME.get(name)
        if spec is None:
            raise UnknownTool(name)
        given = _without_injected(arguments if arguments is not None else {})
        try:
            parsed = msgspec.convert(given, spec.args)
        except msgspec.ValidationError as exc:
            return _invalid(exc, spec)
        if self.refused is not None:
            return self.refused
        if not self.hub.has_token:
            return no_token()
        try:
            return await self._handlers[name](parsed)
        except ToolFailure as exc:
            return exc
        except HubError as exc:
            return from_hub(exc, self.hub.hub, spec)
        except EgressRefused as exc:
            return from_egress(exc)
        except Exception:  # the server must answer every call; the crash is logged
            log.exception("tool %s failed unexpectedly", name)
            return ToolFailure(INTERNAL, f"{name} failed inside the MCP server; see its log")

    # -- shared -----------------------------------------------------------------------

    async def me(self) -> dict[str, Any]:
        if self._me is None:
            self._me = await self.hub.me()
        return self._me

    async def my_name(self) -> str:
        return str((await self.me())["member"]["name"])

    async def room_id(self, ref: str) -> str:
        return await self.hub.resolve_room(ref)

    def _posted(self, res: PostResult, key: str, source: str) -> dict[str, Any]:
        ev = res.event
        delivery = REPLAYED if res.idempotency_status == "replayed" else SENT
        out: dict[str, Any] = {
            "delivery": delivery,
            "event": ev.id,
            "room": ev.room,
            "seq": ev.seq,
            "targets": ev.targets,
            "route": ev.route,
            "idempotency_key": key,
            "key_source": source,
        }
        if delivery == REPLAYED and source == keys.DERIVED:
            out["note"] = REPLAY_NOTE
        return out

    # -- posting ----------------------------------------------------------------------

    async def post_message(self, args: a.PostMessageArgs) -> dict[str, Any]:
        room = await self.room_id(args.room)
        text = _text(args.text)
        key, source = keys.key_for(
            self.session_id, "post_message", args.idempotency_key, {"room": room, "text": text}
        )
        return self._posted(await self.hub.post_message(room, text, key=key), key, source)

    async def reply(self, args: a.ReplyArgs) -> dict[str, Any]:
        text = _text(args.text)
        target = await self.hub.event(args.event_id)
        key, source = keys.key_for(
            self.session_id,
            "reply",
            args.idempotency_key,
            {"event_id": target.id, "text": text, "reply_kind": args.reply_kind},
        )
        res = await self.hub.post_message(
            target.room, text, key=key, in_reply_to=target.id, reply_kind=args.reply_kind
        )
        out = self._posted(res, key, source)
        out["in_reply_to"] = target.id
        out["receipt"] = res.event.route == "receipt"
        return out

    async def send_to_thread(self, args: a.SendToThreadArgs) -> dict[str, Any]:
        _text(args.text)
        sent = await self.hub.thread_send(args.thread, args.text, key=args.idempotency_key)
        return {
            "delivery": sent.delivery,
            "event": sent.message_id,
            "room": sent.thread_id,
            "thread": sent.thread_id,
            "command_id": sent.command_id,
        }

    async def ensure_thread(self, args: a.EnsureThreadArgs) -> dict[str, Any]:
        workspace = args.workspace or str((await self.me())["workspace"]["name"])
        t = await self.hub.ensure_thread(workspace, args.name, args.owner)
        return {**msgspec.to_builtins(t), "room": t.thread_id}

    async def upload_file(self, args: a.UploadFileArgs) -> dict[str, Any]:
        # The path is judged before the hub is asked anything: a file outside the roots is
        # refused as that (path_outside_roots), whether the hub answers or not.
        opened = self.roots.open_path(_absolute(args.path, self.roots))
        caption = (args.caption or "").strip()
        with os.fdopen(opened.fd, "rb") as f:  # the bytes come from the judged descriptor
            room = await self.room_id(args.room)
            digest = _sha256(f)
            key, source = keys.key_for(
                self.session_id,
                "upload_file",
                args.idempotency_key,
                keys.upload_arguments(room, os.fstat(f.fileno()), opened.name, caption, digest),
            )
            mime = mimetypes.guess_type(opened.name)[0] or "application/octet-stream"
            res = await self.hub.upload_file(
                room, f, opened.name, caption=caption, key=key, mime_type=mime
            )
        out = self._posted(res, key, source)
        if res.media is not None:
            out["media"] = msgspec.to_builtins(res.media)
        return out

    # -- reading ----------------------------------------------------------------------

    async def read_inbox(self, args: a.ReadInboxArgs) -> dict[str, Any]:
        me = await self.my_name()
        page = await self.hub.inbox(after=args.after, wait=args.wait)
        items = [
            {
                "cursor": i.cursor,
                "event": _event_out(i.event),
                "delegation_waiting": delegation_waiting(i.event, me),
            }
            for i in page.items
        ]
        return {"items": items, "cursor": page.cursor}

    async def ack_inbox(self, args: a.AckInboxArgs) -> dict[str, Any]:
        return {"cursor": await self.hub.ack(args.cursor)}

    async def list_rooms(self, args: a.ListRoomsArgs) -> dict[str, Any]:
        workspace = str((await self.me())["workspace"]["name"])
        rooms = await self.hub.rooms(workspace)
        fields = ("id", "name", "kind", "mode", "archived", "participants", "owner")
        return {"rooms": [{f: getattr(r, f) for f in fields} for r in rooms]}

    async def read_room(self, args: a.ReadRoomArgs) -> dict[str, Any]:
        room = await self.room_id(args.room)
        evs = await self.hub.events(room, after=args.after, limit=args.limit)
        return {
            "room": room,
            "events": [_event_out(e) for e in evs],
            "next_after": evs[-1].seq if evs else args.after,
        }

    async def delivery_state(self, args: a.DeliveryStateArgs) -> dict[str, Any]:
        return await self.hub.delivery(args.event_id)

    async def wait_for_receipt(self, args: a.WaitForReceiptArgs) -> dict[str, Any]:
        """Asks the hub's delivery state until every receipt is in or the wait ends: MCP
        Tasks are not served by the SDK (docs/mcp.md "Waiting for a delegate")."""
        deadline = time.monotonic() + args.wait
        pause = RECEIPT_POLL_FIRST
        while True:
            state = await self.hub.delivery(args.event_id)
            receipts = state.get("receipts")
            if receipts is None:
                raise ToolFailure(
                    NOT_A_DELEGATION,
                    f"event {args.event_id} delegated to no agent, so no receipt will come "
                    "(a delegation is an agent's message that @mentions an agent)",
                )
            done = bool(receipts) and all(r.get("state") == "replied" for r in receipts)
            left = deadline - time.monotonic()
            if done or left <= 0:
                break
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, RECEIPT_POLL_MAX)
        out = []
        for r in receipts:
            got = dict(r)
            if r.get("state") == "replied" and r.get("receipt_event"):
                got["text"] = (await self.hub.event(str(r["receipt_event"]))).text
            out.append(got)
        return {
            "event_id": args.event_id,
            "state": "replied" if done else "pending",
            "receipts": out,
        }

    async def members(self, args: a.MembersArgs) -> dict[str, Any]:
        workspace = str((await self.me())["workspace"]["name"])
        found = await self.hub.members(workspace)
        return {"workspace": workspace, "members": msgspec.to_builtins(found)}

    async def search(self, args: a.SearchArgs) -> dict[str, Any]:
        room = await self.room_id(args.room) if args.room is not None else None
        return await self.hub.search(
            args.query, room=room, sender=args.sender, before=args.before, limit=args.limit
        )

    # -- file reservations (docs/reservations.md) --------------------------------------

    async def _workspace(self) -> str:
        return str((await self.me())["workspace"]["name"])

    def _project(self, given: str | None) -> str:
        found = given or origin_project()
        if not found:
            raise ToolFailure(
                INVALID_ARGUMENTS,
                "no project: pass `project` (the MCP server's working directory is no git "
                "repository with an origin remote); nothing was done",
            )
        return found

    async def reserve_paths(self, args: a.ReservePathsArgs) -> dict[str, Any]:
        project = self._project(args.project)
        room = await self.room_id(args.room) if args.room is not None else None
        canonical: dict[str, Any] = {
            "project": project,
            "paths": list(args.paths),
            "exclusive": args.exclusive,
            "ttl_seconds": args.ttl_seconds,
            "reason": args.reason,
            "room": room,
        }
        key, source = keys.key_for(
            self.session_id, "reserve_paths", args.idempotency_key, canonical
        )
        r = await self.hub.reserve(
            await self._workspace(),
            project,
            list(args.paths),
            exclusive=args.exclusive,
            ttl_seconds=args.ttl_seconds,
            reason=args.reason,
            room=room,
            key=key,
        )
        return {"reservation": msgspec.to_builtins(r), "idempotency_key": key, "key_source": source}

    async def renew_reservation(self, args: a.RenewReservationArgs) -> dict[str, Any]:
        r = await self.hub.renew_reservation(
            args.reservation_id, args.ttl_seconds, args.idempotency_key
        )
        return {"reservation": msgspec.to_builtins(r)}

    async def release_reservation(self, args: a.ReleaseReservationArgs) -> dict[str, Any]:
        r = await self.hub.release_reservation(args.reservation_id, args.idempotency_key)
        return {"reservation": msgspec.to_builtins(r)}

    async def list_reservations(self, args: a.ListReservationsArgs) -> dict[str, Any]:
        found = await self.hub.reservations(await self._workspace(), args.project)
        return {"reservations": msgspec.to_builtins(found)}

    async def check_paths(self, args: a.CheckPathsArgs) -> dict[str, Any]:
        project = self._project(args.project)
        found = await self.hub.check_paths(await self._workspace(), project, list(args.paths))
        return {"project": project, "conflicts": msgspec.to_builtins(found)}


def delegation_waiting(ev: Event, me: str) -> bool:
    """The event delegated work to `me` and `me` has not sent its terminal receipt yet."""
    md = ev.metadata
    to, done = md.get("delegated_to") or [], md.get("receipt_from") or []
    return isinstance(to, list) and me in to and not (isinstance(done, list) and me in done)


def _text(text: str) -> str:
    """The text as the hub stores it (trimmed, docs/api.md); blank text is refused here."""
    trimmed = text.strip()
    if not trimmed:
        raise ToolFailure(INVALID_ARGUMENTS, "text is empty (only white space); nothing was done")
    return trimmed


def _absolute(path: str, roots: EgressRoots) -> str:
    """The path to judge: a relative one from the server's working directory (where the
    agent started it); `.` and `//` fold away, `..` is kept for the judge to refuse."""
    if not roots.roots:
        raise ToolFailure(
            NO_ROOTS, "no --allow-root was given to `agentpost mcp`: no file may be sent"
        )
    if "\x00" in path:
        raise ToolFailure(INVALID_ARGUMENTS, "the path holds a NUL byte; nothing was uploaded")
    return str(Path.cwd() / path)


def _sha256(f: Any) -> str:
    h = hashlib.sha256()
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
    f.seek(0)
    return h.hexdigest()
