"""Making events: the write-transaction half of a post (docs/api.md).

Runs inside the store's write transaction: every check here is authoritative, and a
refusal rolls the whole job back (the key stays unused).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import msgspec

from agentpost.core.clock import now_ms, rfc3339
from agentpost.core.errors import AuthError, Code, RequestError
from agentpost.core.ids import new_id
from agentpost.hub import auth, kinds, leases, routing
from agentpost.hub.idempotency import CREATED, STATE_CREATED, Answer, Created, Rejected
from agentpost.hub.notify import inbox_key, room_key
from agentpost.hub.routing import sensitive
from agentpost.hub.schemas import Attachment, Event
from agentpost.store import events, inbox, keys, media, members, rooms
from agentpost.store.engine import Tx
from agentpost.store.models import KeyRecord, MediaRow, Member, Room

_encode = msgspec.json.encode


def sendable_room(
    tx: Tx, room_id: str, sender: Member, fence: int | None = None, token: str | None = None
) -> tuple[Room, int]:
    """The room and the post's `seq`, if `sender` may post into it now. The room's row is
    locked first (taking its next seq), so every check below reads what is committed by
    then: an archive, a settings change or a removal that returned before is seen
    (docs/architecture.md#write-path).
    A refusal rolls the seq back with the job, a recorded one too (`UndoJob`). A Worker's
    post names its lease's fence: an older one is refused
    (docs/architecture.md#one-worker-per-agent). `token`: the hash of a token taken from a hint
    (hub/auth.py `TokenCache`), checked here again."""
    seq = rooms.next_seq(tx, room_id)
    leases.check_fence(tx, sender, fence)
    found = rooms.room_for_member(tx, room_id, sender.id)
    if seq is None or found is None or found[0].workspace_id != sender.workspace_id:
        raise RequestError(Code.ROOM_NOT_FOUND, f"no room {room_id!r}")
    room, participant, status = found
    if status != "active":
        raise auth.removed(sender.name, sender.kind)
    if token is not None and not members.held_tokens(tx, [(sender.id, token)]):
        raise AuthError(Code.UNAUTHORIZED, "unknown token")
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
    delegate: bool = False,
    trigger: str | None = None,
) -> tuple[Event, bytes]:
    """Route, take the next seq, store the event and its inbox rows; wake after commit."""
    # The room's row lock is held already (sendable_room took the seq); routing may lock
    # E1 of a receipt after it: one lock order in every job, so writers cannot deadlock
    # (docs/architecture.md#store).
    event_id = new_id("ev")
    decision = routing.route(
        tx,
        room,
        sender,
        routing.Message(event_id, text, in_reply_to, reply_kind, delegate, trigger),
        router_choice,
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
        sender_id=sender.id,
        cause=decision.cause,
    )
    body = _encode(ev)
    events.insert(tx, room.id, seq, ev.id, body, text, sender_id=sender.id)
    inbox.add(tx, [m.id for m in decision.targets], room.id, seq)
    for notice in decision.notices:
        append_notice(tx, room, notice, about=ev.id)
    tx.notify(room_key(room.id))
    for m in decision.targets:
        tx.notify(inbox_key(m.id))
    return ev, body


def append_notice(
    tx: Tx, room: Room, notice: routing.fences.Notice, about: str | None
) -> None:
    """A hub notice (type `notice`, sender kind `system`) right after the event it is
    about, in the same transaction: a retried post replays its answer and never writes a
    second one. It wakes no one; readers of the room see it (docs/delegation.md). `about`
    None: a notice about no event (a file reservation's grant or end, docs/reservations.md)."""
    seq = rooms.next_seq(tx, room.id)
    assert seq is not None  # the room's row is locked by this transaction
    ev = Event(
        id=notice.id,
        room=room.id,
        seq=seq,
        sender=routing.fences.NOTICE_SENDER,
        sender_kind="system",
        type=kinds.NOTICE,
        text=notice.text,
        attachments=[],
        metadata=notice.metadata,
        in_reply_to=about,
        reply_kind=None,
        targets=[],
        created_at=rfc3339(now_ms()),
        route="notice",
    )
    events.insert(tx, room.id, seq, ev.id, _encode(ev), notice.text, sender_id=None)


def refuse_secrets(room: Room, text: str) -> None:
    """The room's sensitive-data filter (docs/delegation.md "The rules"); the refusal spends the
    key, and the seq taken before it is given back (hub/idempotency.py undoes the job before
    recording it)."""
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
    fence: int | None = None,
    token: str | None = None,
    delegate: bool = False,
    trigger: str | None = None,
) -> Created:
    """`trigger`: the event the post says it serves (hub/routing/cause.py): the Worker's
    Turn (only with its lease's `fence`) or an agent's call back through a remote."""
    room, seq = sendable_room(tx, room_id, sender, fence, token)
    refuse_secrets(room, normalized["text"])
    replied_to = normalized["in_reply_to"]
    if replied_to is not None and events.room_of(tx, replied_to) != room.id:
        # A reply (a receipt above all) to nothing is refused, never posted as if it were
        # one: its sender learns at once that the id is wrong
        # (docs/api.md "Limits of what a request may carry").
        raise RequestError(
            Code.INVALID_REQUEST, f"no event {replied_to!r} in this room", field="$.in_reply_to"
        )
    ids: list[str] = normalized["attachments"]
    # A redacted or expired file is no file of the room any more (hub/relations.py,
    # hub/retention.py).
    found = {
        m.id: m for m in media.by_ids(tx, room.id, ids) if not m.redacted and m.expired_at is None
    }
    missing = [i for i in ids if i not in found]
    if missing:
        raise RequestError(
            Code.INVALID_REQUEST,
            f"unknown media in this room: {', '.join(missing)}",
            field="$.attachments",
        )
    media.used(tx, room.id, ids, seq, now_ms())  # kept while this event stands (retention)
    ev, body = append_event(
        tx,
        room,
        sender,
        type_=kinds.MESSAGE,
        text=normalized["text"],
        attachments=[attachment_of(found[i]) for i in ids],
        metadata=normalized["metadata"],
        in_reply_to=normalized["in_reply_to"],
        reply_kind=normalized["reply_kind"],
        seq=seq,
        router_choice=router_choice,
        delegate=delegate,
        trigger=trigger,
    )
    return Created(201, b'{"event":' + body + b"}", room.id, ev.id)


def create_media_event(
    tx: Tx,
    room_id: str,
    sender: Member,
    row: MediaRow,
    caption: str,
    fence: int | None = None,
    trigger: str | None = None,
) -> Created:
    room, seq = sendable_room(tx, room_id, sender, fence)
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
    media.insert(tx, stored, seq)
    ev, body = append_event(
        tx,
        room,
        sender,
        type_=kinds.MEDIA,
        text=caption,
        attachments=[attachment_of(stored)],
        metadata={},
        in_reply_to=None,
        reply_kind=None,
        seq=seq,
        trigger=trigger,
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


@dataclass(frozen=True, slots=True)
class PlainPost:
    """A keyed message the writer may write together with others (`write_plain`)."""

    key: str
    fingerprint: str
    room_id: str
    sender: Member
    text: str
    metadata: dict[str, Any]
    token: str | None = None  # a hinted token's hash to check again (`sendable_room`)


def is_plain(normalized: dict[str, Any]) -> bool:
    """Plain text with nothing that needs a decision of its own before the room is known: no
    attachment, no reply (receipts, answers), no `@` (mentions, delegation), no `/stop`."""
    text: str = normalized["text"]
    return (
        not normalized["attachments"]
        and normalized["in_reply_to"] is None
        and normalized["reply_kind"] is None
        and "@" not in text
        and not routing.is_stop(text)
    )


def write_plain(tx: Tx, posts: list[PlainPost]) -> list[tuple[Answer, list[str]] | None]:
    """Many plain keyed posts as data, in one savepoint (store/batch.py `AsData`): the key
    claims, room locks (id order), the rooms, sole agents, seqs, events and key records,
    one statement each for all of them. A post this cannot answer exactly as
    `create_message` under `Idempotency` would (a key with a record, any refusal, a room
    whose routing decides per post) is declined: None, and it runs as its own job after."""
    now = int(time.time() * 1000)
    out: list[tuple[Answer, list[str]] | None] = [None] * len(posts)
    slots: dict[tuple[str, str], int] = {}
    for i, p in enumerate(posts):
        slots.setdefault((p.sender.id, p.key), i)  # a key twice: the second runs alone
    claimed = keys.claim_many(
        tx, [(slot[0], slot[1], posts[i].fingerprint, now) for slot, i in slots.items()]
    )
    mine = [i for slot, i in slots.items() if slot in claimed]
    if not mine:
        return out
    rooms.lock_many(tx, sorted({posts[i].room_id for i in mine}))
    found = rooms.rooms_for_members(
        tx, sorted({(posts[i].room_id, posts[i].sender.id) for i in mine})
    )
    hinted = sorted({(p.sender.id, p.token) for p in (posts[i] for i in mine) if p.token})
    held = members.held_tokens(tx, hinted) if hinted else set()
    routes: dict[int, tuple[Room, str]] = {}
    for i in mine:
        p = posts[i]
        got = found.get((p.room_id, p.sender.id))
        if got is None or (p.token is not None and (p.sender.id, p.token) not in held):
            continue
        room, participant, status = got
        if (
            room.workspace_id != p.sender.workspace_id
            or status != "active"
            or not participant
            or room.archived
            or room.mode == "master"
            or (room.sensitive_filter and sensitive.findings(p.text))
        ):
            continue
        if p.sender.kind == "agent":
            continue  # an agent's event carries its cause (hub/routing/cause.py)
        if room.router in ("none", "sole-agent"):
            routes[i] = (room, "router_" + room.router)
    sole = (
        rooms.sole_agents(
            tx, sorted({room.id for room, how in routes.values() if how == "router_sole-agent"})
        )
        if any(how == "router_sole-agent" for _r, how in routes.values())
        else {}
    )
    declined = [posts[i] for i in mine if i not in routes]
    if declined:
        keys.unclaim_many(tx, [(p.sender.id, p.key) for p in declined])
    last: dict[str, int] = {}
    rows: list[tuple[str, int, str, bytes, str, str]] = []
    records: list[KeyRecord] = []
    for i, (room, how) in sorted(routes.items()):
        p = posts[i]
        targets: list[tuple[str, str]] = []
        if how == "router_sole-agent":
            count, agent_id, agent_name = sole.get(room.id, (0, "", ""))
            route = "sole_agent" if count == 1 else "no_sole_agent"
            if count == 1:
                targets = [(agent_id, agent_name)]
        else:
            route = how
        seq = last[room.id] = last.get(room.id, room.last_seq) + 1
        ev = Event(
            id=new_id("ev"),
            room=room.id,
            seq=seq,
            sender=p.sender.name,
            sender_kind=p.sender.kind,
            type=kinds.MESSAGE,
            text=p.text,
            attachments=[],
            metadata=p.metadata,
            in_reply_to=None,
            reply_kind=None,
            targets=[name for _id, name in targets],
            created_at=rfc3339(now_ms()),
            route=route,
            sender_id=p.sender.id,
        )
        body = _encode(ev)
        answer = b'{"event":' + body + b"}"
        rows.append((room.id, seq, ev.id, body, p.text, p.sender.id))
        records.append(
            KeyRecord(
                member_id=p.sender.id,
                key=p.key,
                fingerprint=p.fingerprint,
                state=STATE_CREATED,
                status=201,
                body=answer,
                room_id=room.id,
                event_id=ev.id,
                created_at=now,
            )
        )
        inbox.add(tx, [mid for mid, _name in targets], room.id, seq)
        out[i] = (
            Answer(201, answer, CREATED),
            [room_key(room.id), *(inbox_key(mid) for mid, _name in targets)],
        )
    if rows:
        with tx.pipeline():  # independent of each other: one round trip on PostgreSQL
            rooms.set_seqs(tx, last)
            events.insert_many(tx, rows)
            keys.finish_many(tx, records)
    return out
