"""Exports (docs/api.md "Export"): a room's events written out as one file, JSONL or a
Markdown transcript, and every room of a workspace for its operator.

An export is checked whole before its first byte (who asks, the room, the format, the size
of the files it would embed), then read from the store a page at a time, so an export of
any size holds one page of the hub's memory. It covers the events up to the room's
`last_seq` when it began (the header says which): events posted meanwhile wait for the
next export, while an older event edited or redacted meanwhile reads as it does by then.
Each page re-checks the reader, as a stream does: a member removed or taken out of the room
midway gets an `error` end line (core/export.py) in place of the rest.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from agentpost import __version__
from agentpost.core import export as fmt
from agentpost.core.clock import now_ms, rfc3339
from agentpost.core.errors import AgentpostError, Code, RequestError
from agentpost.hub import auth, transcript
from agentpost.hub.delivery import receipts_for
from agentpost.hub.routes.rooms import room_out, visible_room
from agentpost.hub.schemas import Event, ReceiptState, RoomOut
from agentpost.hub.state import Hub
from agentpost.store import events, media, members, rooms
from agentpost.store.engine import Db
from agentpost.store.models import MediaRow, Member, Room

log = logging.getLogger("agentpost.hub")

PAGE_EVENTS = 500
PAGE_BYTES = 512 * 1024
CHUNK_BYTES = 64 * 1024


class _Attachment(msgspec.Struct):
    id: str
    name: str = ""


class _Peek(msgspec.Struct):
    """The few fields of an event an export looks at before writing it."""

    id: str
    sender_kind: str = ""
    attachments: list[_Attachment] = []
    metadata: dict[str, Any] = {}
    targets: list[str] = []
    in_reply_to: str | None = None
    relates_to: str | None = None


def _asks_agents(p: _Peek) -> bool:
    """Whether the event's delivery state has `receipts` (docs/delivery.md): a delegation,
    or a person's message that woke someone."""
    return bool(p.metadata.get("delegated_to")) or (p.sender_kind == "human" and bool(p.targets))


@dataclass
class _Page:
    rows: list[tuple[int, bytes]]
    peeks: list[_Peek]  # one per row
    files: dict[str, MediaRow]  # the page's attachments as the store holds them now
    receipts: dict[str, list[ReceiptState]]
    seqs: dict[str, int]  # events the page's events name (Markdown links)
    last: bool  # nothing past this page is part of the export


def _served(row: MediaRow | None) -> bool:
    return row is not None and not row.redacted and row.expired_at is None


@dataclass
class RoomExport:
    """One room's export, checked and ready to stream."""

    hub: Hub
    who: Member | None  # None: the operator's workspace export
    room: RoomOut
    format: str
    files: str
    exported_at: str = field(default_factory=lambda: rfc3339(now_ms()))
    embedded: dict[str, int] = field(default_factory=dict)  # media id: the seq it went in

    @property
    def filename(self) -> str:
        return fmt.room_file_name(self.room.name, self.format)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The export's bytes, in chunks of about 64 KiB (a file embedded: one line)."""
        held: list[bytes] = []
        size = 0
        async for piece in self._pieces():
            held.append(piece)
            size += len(piece)
            if size >= CHUNK_BYTES:
                yield b"".join(held)
                held, size = [], 0
        if held:
            yield b"".join(held)

    async def _pieces(self) -> AsyncIterator[bytes]:
        yield self._header()
        after, written = 0, 0
        while after < self.room.last_seq:
            try:
                page = await self.hub.engine.read_stream(lambda db, pos=after: self._read(db, pos))
            except AgentpostError as exc:
                log.info("export of %s cut short: %s", self.room.id, exc.message)
                yield from_error(self.format, exc)
                return
            for (seq, body), peek in zip(page.rows, page.peeks, strict=True):
                yield await self._event(body, peek, page)
                written += 1
                after = seq
            if page.last:
                break
        end = {"end": fmt.ROOM, "events": written, "last_seq": self.room.last_seq}
        if self.format == fmt.MARKDOWN:
            yield transcript.footer(written, self.room.last_seq).encode()
        yield fmt.end_line(self.format, end)

    def _header(self) -> bytes:
        if self.format == fmt.MARKDOWN:
            by = self.who.name if self.who is not None else None
            return transcript.header(self.room, self.exported_at, by).encode()
        head = {
            "export": fmt.ROOM,
            "version": fmt.VERSION,
            "room": self.room,
            "exported_at": self.exported_at,
            "exported_by": self.who.name if self.who is not None else None,
            "files": self.files,
            "agentpost": __version__,
        }
        return msgspec.json.encode(head) + b"\n"

    def _read(self, db: Db, after: int) -> _Page:
        if self.who is not None:  # an export outlives its auth check, as a stream does
            auth.still_active(db, self.who)
        visible_room(db, self.room.id, self.who)
        found = events.page(db, self.room.id, after, PAGE_EVENTS, PAGE_BYTES)
        rows = [(seq, body) for seq, body in found if seq <= self.room.last_seq]
        last = not found or len(rows) < len(found) or rows[-1][0] >= self.room.last_seq
        peeks = [msgspec.json.decode(body, type=_Peek) for _, body in rows]
        ids = list({a.id for p in peeks for a in p.attachments})
        files = {m.id: m for m in media.by_ids(db, self.room.id, ids)}
        receipts: dict[str, list[ReceiptState]] = {}
        for (_, body), p in zip(rows, peeks, strict=True):
            if _asks_agents(p):
                said = receipts_for(db, msgspec.json.decode(body, type=Event))
                if said:
                    receipts[p.id] = said
        seqs: dict[str, int] = {}
        if self.format == fmt.MARKDOWN:
            named = {p.in_reply_to or p.relates_to for p in peeks} - {None}
            named |= {r.receipt_event for rs in receipts.values() for r in rs} - {None}
            seqs = events.seqs_of(db, self.room.id, [n for n in named if n is not None])
        return _Page(rows, peeks, files, receipts, seqs, last)

    async def _event(self, body: bytes, peek: _Peek, page: _Page) -> bytes:
        if self.format == fmt.MARKDOWN:
            ev = msgspec.json.decode(body, type=Event)
            gone = {a.id for a in ev.attachments if not _served(page.files.get(a.id))}
            return transcript.event(ev, page.seqs, gone, page.receipts.get(ev.id)).encode()
        line = body if not peek.attachments else await self._with_files(body, page)
        said = page.receipts.get(peek.id)
        if said is not None:
            line += b"\n" + msgspec.json.encode({"receipts_of": peek.id, "receipts": said})
        return line + b"\n"

    async def _with_files(self, body: bytes, page: _Page) -> bytes:
        """The event with each attachment's `path` (or its bytes, `content_base64`); a
        file no longer served (redacted, expired) gets `gone: true` instead."""
        ev: dict[str, Any] = msgspec.json.decode(body)
        for att in ev["attachments"]:
            row = page.files.get(att["id"])
            if row is None or not _served(row):
                att["gone"] = True
            elif self.files == fmt.EMBED and att["id"] in self.embedded:
                # The bytes are in the line of the event that carried them first: each file
                # once per export, so the embed cap (the room's files, each counted once)
                # bounds what is written.
                att["embedded_in"] = self.embedded[att["id"]]
            elif self.files == fmt.EMBED:
                self.embedded[att["id"]] = ev["seq"]
                data = await asyncio.to_thread(_read_blob, self.hub.blobs.path_of(row.sha256))
                if data is None:
                    log.warning("export of %s: the file of %s is missing", self.room.id, row.id)
                    att["gone"] = True
                else:
                    att["content_base64"] = data
            else:
                att["path"] = fmt.attachment_path(att["id"], att["name"])
        return msgspec.json.encode(ev)


def _read_blob(path: Any) -> str | None:
    try:
        with open(path, "rb") as f:
            return base64.b64encode(f.read()).decode("ascii")
    except FileNotFoundError:
        return None


def from_error(format: str, exc: AgentpostError) -> bytes:
    """The end line of an export the hub had to stop (after a Markdown note saying so)."""
    line = fmt.end_line(format, {"error": {"code": str(exc.code), "message": exc.message}})
    if format == fmt.MARKDOWN:
        return transcript.cut(exc.message).encode() + line
    return line


def check_options(format: str | None, files: str | None) -> tuple[str, str]:
    """`format` and `files` of an export request, with their defaults; 400 naming the
    field that is wrong."""
    format = format if format is not None else fmt.JSONL
    files = files if files is not None else fmt.PATHS
    if format not in fmt.FORMATS:
        raise RequestError(Code.INVALID_REQUEST, "format must be jsonl or md", field="format")
    if files not in fmt.FILE_MODES:
        raise RequestError(Code.INVALID_REQUEST, "files must be paths or embed", field="files")
    if format == fmt.MARKDOWN and files == fmt.EMBED:
        raise RequestError(
            Code.INVALID_REQUEST,
            "files=embed is for format=jsonl; a Markdown export links its files (files=paths)",
            field="files",
        )
    return format, files


async def room_export(hub: Hub, who: Member, room_id: str, format: str, files: str) -> RoomExport:
    """A participant's export of a room, checked as reading its events is (docs/api.md);
    files=embed is refused (413) when the room's files total more than the embed cap."""
    cap = hub.config.max_upload_bytes * fmt.EMBED_FACTOR

    def read(db: Db) -> RoomOut:
        room = visible_room(db, room_id, who)
        if files == fmt.EMBED:
            total = media.total_size(db, room.id)
            if total > cap:
                raise RequestError(
                    Code.PAYLOAD_TOO_LARGE,
                    f"the room's files total {total} bytes, over the {cap} bytes an export may"
                    f" embed (4 × this hub's max upload bytes, {hub.config.max_upload_bytes});"
                    " export with files=paths and download the files (agentpost room export"
                    " ROOM --output DIR does both)",
                )
        return room_out(db, room, members.workspace_name(db, room.workspace_id), who)

    room = await hub.engine.read(read)
    return RoomExport(hub, who, room, format, files)


@dataclass
class WorkspaceExport:
    """Every room of a workspace, for its operator: a header line, then each room's JSONL
    export in turn (files by path), then an end line."""

    hub: Hub
    workspace: str
    workspace_id: str
    rooms: list[Room]
    exported_at: str = field(default_factory=lambda: rfc3339(now_ms()))

    async def chunks(self) -> AsyncIterator[bytes]:
        head = {
            "export": fmt.WORKSPACE,
            "version": fmt.VERSION,
            "workspace": {"id": self.workspace_id, "name": self.workspace},
            "exported_at": self.exported_at,
            "rooms": [{"id": r.id, "name": r.name} for r in self.rooms],
            "agentpost": __version__,
        }
        yield msgspec.json.encode(head) + b"\n"
        for r in self.rooms:
            out = await self.hub.engine.read(lambda db, r=r: _fresh(db, r, self.workspace))
            async for chunk in RoomExport(self.hub, None, out, fmt.JSONL, fmt.PATHS).chunks():
                yield chunk
        yield msgspec.json.encode({"end": fmt.WORKSPACE, "rooms": len(self.rooms)}) + b"\n"


def _fresh(db: Db, room: Room, workspace: str) -> RoomOut:
    """The room as it is now, where its export begins (its `last_seq` bounds it)."""
    return room_out(db, rooms.room_by_id(db, room.id) or room, workspace, None)


async def workspace_export(hub: Hub, ws_name: str) -> WorkspaceExport:
    def read(db: Db) -> WorkspaceExport:
        ws = members.workspace_by_name(db, ws_name)
        if ws is None:
            raise RequestError(Code.NO_WORKSPACE, f"no workspace {ws_name!r}")
        return WorkspaceExport(hub, ws.name, ws.id, rooms.rooms_of_workspace(db, ws.id))

    return await hub.engine.read(read)
