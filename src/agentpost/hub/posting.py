"""Making events: the write-transaction half of a post (DESIGN.md §2, §3).

Runs inside the store's write transaction: every check here is authoritative, and a
refusal rolls the whole job back (the key stays unused).
"""

from __future__ import annotations

from typing import Any

import msgspec

from agentpost.core.clock import now_ms, rfc3339
from agentpost.core.errors import AuthError, Code, RequestError
from agentpost.core.ids import new_id
from agentpost.hub import auth, routing
from agentpost.hub.idempotency import Created, Rejected
from agentpost.hub.notify import inbox_key, room_key
from agentpost.hub.routing import sensitive
from agentpost.hub.schemas import Attachment, Event
from agentpost.store import events, inbox, media, rooms
from agentpost.store.engine import Tx
from agentpost.store.models import MediaRow, Member, Room

_encode = msgspec.json.encode


def sendable_room(tx: Tx, room_id: str, sender: Member) -> tuple[Room, int]:
    """The room and the post's `seq`, if `sender` may post into it now. The room's row is
    locked first (taking its next seq), so every check below reads what is committed by
    then: an archive, a settings change or a removal that returned before is seen (§3, §4).
    A refusal rolls the seq back with the job, a recorded one too (`UndoJob`)."""
    seq = rooms.next_seq(tx, room_id)
    found = rooms.room_for_member(tx, room_id, sender.id)
    if seq is None or found is None or found[0].workspace_id != sender.workspace_id:
        raise RequestError(Code.ROOM_NOT_FOUND, f"no room {room_id!r}")
    room, participant, status = found
    if status != "active":
        raise auth.removed(sender.name, sender.kind)
    if not participant:
        raise AuthError(
            Code.CHANNEL_MEMBERSHIP_REQUIRED, f"{sender.name!r} is not a participant of this room"
        )
    if room.archived:
        raise RequestError(Code.ROOM_ARCHIVED, "the room is archived; unarchive it to post")
    return room, seq


def attachment_of(m: MediaRow) -> Attachment:
    return Attachment(id=m.id, name=m.name, mime_type=m.mime_type, size=m.size, sha256=m.sha256)


def append_event(
    tx: Tx,
    room: Room,
    sender: Member,
    *,
    type_: str,
    text: str,
    attachments: list[Attachment],
    metadata: dict[str, Any],
    in_reply_to: str | None,
    reply_kind: str | None,
    seq: int,
    router_choice: str | None = None,
) -> tuple[Event, bytes]:
    """Route, take the next seq, store the event and its inbox rows; wake after commit."""
    # The room's row lock is held already (sendable_room took the seq); routing may lock
    # E1 of a receipt after it: one lock order in every job, so writers cannot deadlock (§8).
    event_id = new_id("ev")
    decision = routing.route(
        tx, room, sender, routing.Message(event_id, text, in_reply_to, reply_kind), router_choice
    )
    for m in decision.joins:
        rooms.add_participant(tx, room.id, m.id)
    ev = Event(
        id=event_id,
        room=room.id,
        seq=seq,
        sender=sender.name,
        sender_kind=sender.kind,
        type=type_,
        text=text,
        attachments=attachments,
        metadata={**metadata, **decision.marks},
        in_reply_to=in_reply_to,
        reply_kind=reply_kind,
        targets=[m.name for m in decision.targets],
        created_at=rfc3339(now_ms()),
        route=decision.route,
    )
    body = _encode(ev)
    events.insert(tx, room.id, seq, ev.id, body, text)
    inbox.add(tx, [m.id for m in decision.targets], room.id, seq)
    tx.notify(room_key(room.id))
    for m in decision.targets:
        tx.notify(inbox_key(m.id))
    return ev, body


def refuse_secrets(room: Room, text: str) -> None:
    """The room's sensitive-data filter (§4); the refusal spends the key, and the seq taken
    before it is given back (hub/idempotency.py undoes the job before recording it)."""
    if room.sensitive_filter and text:
        found = sensitive.findings(text)
        if found:
            raise Rejected(
                f"refused: the text looks like it carries a secret ({', '.join(found)})",
                reason="sensitive_data",
                room_id=room.id,
            )


def create_message(
    tx: Tx,
    room_id: str,
    sender: Member,
    normalized: dict[str, Any],
    router_choice: str | None = None,
) -> Created:
    room, seq = sendable_room(tx, room_id, sender)
    refuse_secrets(room, normalized["text"])
    replied_to = normalized["in_reply_to"]
    if replied_to is not None and events.room_of(tx, replied_to) != room.id:
        # A reply (a receipt above all) to nothing is refused, never posted as if it were
        # one: its sender learns at once that the id is wrong (§4).
        raise RequestError(
            Code.INVALID_REQUEST, f"no event {replied_to!r} in this room", field="$.in_reply_to"
        )
    ids: list[str] = normalized["attachments"]
    found = {m.id: m for m in media.by_ids(tx, room.id, ids)}
    missing = [i for i in ids if i not in found]
    if missing:
        raise RequestError(
            Code.INVALID_REQUEST,
            f"unknown media in this room: {', '.join(missing)}",
            field="$.attachments",
        )
    ev, body = append_event(
        tx,
        room,
        sender,
        type_="message",
        text=normalized["text"],
        attachments=[attachment_of(found[i]) for i in ids],
        metadata=normalized["metadata"],
        in_reply_to=normalized["in_reply_to"],
        reply_kind=normalized["reply_kind"],
        seq=seq,
        router_choice=router_choice,
    )
    return Created(201, b'{"event":' + body + b"}", room.id, ev.id)


def create_media_event(
    tx: Tx, room_id: str, sender: Member, row: MediaRow, caption: str
) -> Created:
    room, seq = sendable_room(tx, room_id, sender)
    refuse_secrets(room, caption)
    stored = MediaRow(
        id=row.id,
        room_id=room.id,
        sha256=row.sha256,
        name=row.name,
        mime_type=row.mime_type,
        size=row.size,
        uploader=sender.name,
        created_at=row.created_at,
    )
    media.insert(tx, stored)
    ev, body = append_event(
        tx,
        room,
        sender,
        type_="media",
        text=caption,
        attachments=[attachment_of(stored)],
        metadata={},
        in_reply_to=None,
        reply_kind=None,
        seq=seq,
    )
    media_json = _encode(
        {
            "id": stored.id,
            "room": room.id,
            "name": stored.name,
            "mime_type": stored.mime_type,
            "size": stored.size,
            "sha256": stored.sha256,
            "url": f"/v1/media/{stored.id}",
        }
    )
    return Created(201, b'{"media":' + media_json + b',"event":' + body + b"}", room.id, ev.id)
