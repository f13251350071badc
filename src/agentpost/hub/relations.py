"""Edits, reactions and redactions (docs/architecture.md#relations, docs/api.md "Relations"): each
is an event of its own (append-only, `relates_to` = its target), keyed and gated like a post, and
this module is the one place that decides what a read shows of the target. The target's
stored body is what every read serves (pages, the stream, the inbox, search, `GET
/v1/events/{id}`), so each relation rewrites it here, under the target's row lock, in the
relation's own transaction: latest text + `edited`/`edited_at`, the `reactions` summary,
`redacted` with no text, files or edits. Search indexes the latest text.

The service, for the HTTP routes and in-process callers (the AG2 profile); stable::

    await edit(hub, member, room_id, target_id, text, key=None, *, fence=None) -> Posted
    await react(hub, member, room_id, target_id, emoji, key=None, *, remove=False,
                fence=None) -> Posted
    await redact(hub, member, room_id, target_id, reason=None, key=None, *,
                 fence=None) -> Posted

`member` is the acting `store.models.Member` (already authenticated), `key` an
Idempotency-Key (or None), `fence` a Worker's lease fence as on posts. `Posted.event` is the
relation EVENT (`hub.schemas.Event`; None only when the key's answer is a recorded refusal,
then `Posted.answer` is that 422), `Posted.replayed` says the key answered from its record,
`Posted.answer` is exactly what HTTP answers. Every other refusal raises `AgentpostError`
with a stable `code` and changes nothing.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from agentpost.core.clock import now_ms, rfc3339
from agentpost.core.errors import AuthError, Code, RequestError
from agentpost.core.ids import new_id
from agentpost.hub import idempotency, kinds, posting, routing
from agentpost.hub.idempotency import Answer, Created
from agentpost.hub.notify import room_key
from agentpost.hub.schemas import Event, Reaction
from agentpost.hub.state import Hub
from agentpost.hub.submit import submit
from agentpost.store import events, media, members
from agentpost.store.engine import Tx
from agentpost.store.models import Member, Room

EDITS_ROUTE = "POST /v1/rooms/{room}/events/{event}/edits"
REACTIONS_ROUTE = "POST /v1/rooms/{room}/events/{event}/reactions"
REDACTIONS_ROUTE = "POST /v1/rooms/{room}/events/{event}/redactions"
ROUTE = "relation"  # the `route` of a relation event: it wakes no one

MAX_TEXT = 65536
MAX_REASON = 1024
MAX_EMOJI_BYTES = 32
MAX_EMOJI_CODE_POINTS = 10
MAX_EMOJI_PER_EVENT = 50  # distinct emoji on one event: bounds the target's body

_encode = msgspec.json.encode


class _Made(msgspec.Struct):
    event: Event


@dataclass(frozen=True)
class Posted:
    """What a relation call answered: `answer` as HTTP sends it, `event` decoded from it."""

    answer: Answer

    @property
    def event(self) -> Event | None:
        if self.answer.status != 201:
            return None  # a recorded refusal (the sensitive-data filter), replayed as such
        return msgspec.json.decode(self.answer.body, type=_Made).event

    @property
    def replayed(self) -> bool:
        return self.answer.idempotency_status == idempotency.REPLAYED


# -- the service ----------------------------------------------------------------------------


async def edit(
    hub: Hub,
    member: Member,
    room_id: str,
    target_id: str,
    text: str,
    key: str | None = None,
    *,
    fence: int | None = None,
) -> Posted:
    """Replace the text of `target_id` (a message, or a media event's caption) by `text`:
    only its sender may; an edit of an edit edits the original."""
    text = text.strip()
    if len(text) > MAX_TEXT:
        raise RequestError(
            Code.INVALID_REQUEST, f"text is over {MAX_TEXT} characters", field="$.text"
        )
    normalized = {"event": target_id, "text": text}

    def create(tx: Tx) -> Created:
        return _edit(tx, room_id, member, target_id, text, fence)

    return await _run(hub, EDITS_ROUTE, member, room_id, key, normalized, create)


async def react(
    hub: Hub,
    member: Member,
    room_id: str,
    target_id: str,
    emoji: str,
    key: str | None = None,
    *,
    remove: bool = False,
    fence: int | None = None,
) -> Posted:
    """React to `target_id` with `emoji` (`remove`: take that reaction back); any
    participant may, on any event but a relation."""
    check_emoji(emoji)
    normalized: dict[str, Any] = {"event": target_id, "emoji": emoji, "remove": remove}

    def create(tx: Tx) -> Created:
        return _react(tx, room_id, member, target_id, emoji, remove, fence)

    return await _run(hub, REACTIONS_ROUTE, member, room_id, key, normalized, create)


async def redact(
    hub: Hub,
    member: Member,
    room_id: str,
    target_id: str,
    reason: str | None = None,
    key: str | None = None,
    *,
    fence: int | None = None,
) -> Posted:
    """Hide the text, files and edits of `target_id`, keeping the event: its sender may,
    the room's owner, and the owner of the agent that sent it."""
    reason = reason.strip() if reason is not None else None
    if reason is not None and len(reason) > MAX_REASON:
        raise RequestError(
            Code.INVALID_REQUEST, f"reason is over {MAX_REASON} characters", field="$.reason"
        )
    normalized = {"event": target_id, "reason": reason or None}

    def create(tx: Tx) -> Created:
        return _redact(tx, room_id, member, target_id, reason or None, fence)

    return await _run(hub, REDACTIONS_ROUTE, member, room_id, key, normalized, create)


async def _run(
    hub: Hub,
    route: str,
    member: Member,
    room_id: str,
    raw_key: str | None,
    normalized: dict[str, Any],
    create: Callable[[Tx], Created],
) -> Posted:
    # The same key rules and code path as a message post (hub/submit.py, hub/idempotency.py).
    key = idempotency.check_key(raw_key)
    fp = idempotency.fingerprint(route, room_id, normalized) if key else None
    return Posted(await submit(hub, route, member.id, key, fp, create, None, room_id))


def check_emoji(emoji: str) -> None:
    """One short emoji-like string: 1–32 UTF-8 bytes, at most 10 code points, no space,
    control or format character (a zero-width joiner and emoji tags excepted)."""
    size = len(emoji.encode("utf-8", "surrogatepass"))
    if not emoji or size > MAX_EMOJI_BYTES or len(emoji) > MAX_EMOJI_CODE_POINTS:
        raise RequestError(
            Code.INVALID_EMOJI,
            f"emoji must be 1-{MAX_EMOJI_BYTES} bytes and at most "
            f"{MAX_EMOJI_CODE_POINTS} characters",
            field="$.emoji",
        )
    for ch in emoji:
        if ch == "\u200d" or "\U000e0020" <= ch <= "\U000e007f":
            continue
        if unicodedata.category(ch)[0] in ("Z", "C"):
            raise RequestError(
                Code.INVALID_EMOJI,
                f"emoji must not hold whitespace or control characters (U+{ord(ch):04X})",
                field="$.emoji",
            )


# -- the transactions -----------------------------------------------------------------------


def _edit(
    tx: Tx, room_id: str, member: Member, target_id: str, text: str, fence: int | None
) -> Created:
    room, seq = posting.sendable_room(tx, room_id, member, fence)
    target = _original(tx, room, _target(tx, room, target_id))
    if target.type not in kinds.EDITABLE:
        raise _not_for(target, "edited")
    if target.redacted:
        raise _redacted(target)
    # By member id (docs/architecture.md#identity): a member under a name freed by a hard removal
    # is not the one who sent it.
    if target.sender_id is None or target.sender_id != member.id:
        raise AuthError(
            Code.NOT_EVENT_SENDER, f"only {target.sender!r}, who sent {target.id}, may edit it"
        )
    if not text and target.type == kinds.MESSAGE:
        raise RequestError(Code.INVALID_REQUEST, "text must not be blank", field="$.text")
    posting.refuse_secrets(room, text)
    ev, body = _append(tx, room, member, seq, kinds.EDIT, target.id, text, {})
    reshow(tx, target, shown_edited(target, text, ev.created_at))
    return Created(201, b'{"event":' + body + b"}", room.id, ev.id)


def _react(
    tx: Tx,
    room_id: str,
    member: Member,
    target_id: str,
    emoji: str,
    remove: bool,
    fence: int | None,
) -> Created:
    room, seq = posting.sendable_room(tx, room_id, member, fence)
    target = _original(tx, room, _target(tx, room, target_id))
    if target.type not in kinds.RELATABLE:
        raise _not_for(target, "reacted to")
    if target.redacted:
        raise _redacted(target)
    shown = shown_reacted(target, member.name, emoji, remove)
    if len(shown.reactions) > MAX_EMOJI_PER_EVENT:
        raise RequestError(
            Code.REACTION_LIMIT,
            f"{target.id} has {MAX_EMOJI_PER_EVENT} different emoji already; "
            "react with one of those",
        )
    metadata: dict[str, Any] = {"emoji": emoji, **({"remove": True} if remove else {})}
    ev, body = _append(tx, room, member, seq, kinds.REACTION, target.id, "", metadata)
    if shown != target:
        reshow(tx, target, shown)
    return Created(201, b'{"event":' + body + b"}", room.id, ev.id)


def _redact(
    tx: Tx, room_id: str, member: Member, target_id: str, reason: str | None, fence: int | None
) -> Created:
    room, seq = posting.sendable_room(tx, room_id, member, fence)
    target = _target(tx, room, target_id)
    if target.type not in kinds.RELATABLE:
        raise _not_for(target, "redacted (redact the event it names, or react again)")
    if target.redacted:
        raise _redacted(target)
    if not _may_redact(tx, room, member, target):
        raise AuthError(
            Code.NOT_EVENT_SENDER,
            f"only {target.sender!r}, who sent {target.id}, the room's owner or the agent's "
            "owner may redact it",
        )
    if reason:
        posting.refuse_secrets(room, reason)
    metadata: dict[str, Any] = {"reason": reason} if reason else {}
    ev, body = _append(tx, room, member, seq, kinds.REDACTION, target.id, "", metadata)
    reshow(tx, target, shown_redacted(target))
    # Its edits carry its text too: hidden with it. Its reactions only name an emoji.
    for rel_id, rel_body in events.relations_of(tx, target.id):
        rel = msgspec.json.decode(rel_body, type=Event)
        if rel.type == kinds.EDIT and not rel.redacted:
            events.replace_body(tx, rel_id, _encode(shown_redacted(rel)))
    media.redact(tx, room.id, [a.id for a in target.attachments])
    return Created(201, b'{"event":' + body + b"}", room.id, ev.id)


def _may_redact(tx: Tx, room: Room, member: Member, target: Event) -> bool:
    """Its sender, the room's owner, or the owner of the agent that sent it, each by member
    id (docs/architecture.md#identity): a name freed by a hard removal and taken again is none."""
    if target.sender_id is not None and target.sender_id == member.id:
        return True
    if room.owner_id is not None and room.owner_id == member.id:
        return True
    if target.sender_kind == "agent" and target.sender_id is not None:
        sender = members.member_by_id(tx, target.sender_id)
        return sender is not None and sender.owner_id == member.id
    return False


def _target(tx: Tx, room: Room, target_id: str) -> Event:
    """The target, its row locked (after the room's: one lock order, as receipts)."""
    locked = events.lock(tx, target_id)
    if locked is None or locked[0] != room.id:
        raise RequestError(Code.EVENT_NOT_FOUND, f"no event {target_id!r} in this room")
    return msgspec.json.decode(locked[2], type=Event)


def _original(tx: Tx, room: Room, ev: Event) -> Event:
    """An edit stands for the event it edits: edits and reactions go to the original."""
    if ev.type == kinds.EDIT and ev.relates_to is not None:
        return _target(tx, room, ev.relates_to)
    return ev


def _not_for(target: Event, what: str) -> RequestError:
    return RequestError(
        Code.INVALID_RELATION_TARGET, f"{target.id} is a {target.type} event: it cannot be {what}"
    )


def _redacted(target: Event) -> RequestError:
    return RequestError(Code.EVENT_REDACTED, f"{target.id} was redacted; nothing to change")


def _append(
    tx: Tx,
    room: Room,
    sender: Member,
    seq: int,
    type_: str,
    target_id: str,
    text: str,
    metadata: dict[str, Any],
) -> tuple[Event, bytes]:
    """The relation event itself: seen in the room's log and stream, waking no one."""
    ev = Event(
        id=new_id("ev"),
        room=room.id,
        seq=seq,
        sender=sender.name,
        sender_kind=sender.kind,
        type=type_,
        text=text,
        attachments=[],
        metadata=metadata,
        in_reply_to=None,
        reply_kind=None,
        targets=[],
        created_at=rfc3339(now_ms()),
        route=ROUTE,
        relates_to=target_id,
        sender_id=sender.id,
    )
    body = _encode(ev)
    events.insert(
        tx, room.id, seq, ev.id, body, text, relates_to=target_id, sender_id=sender.id
    )
    tx.notify(room_key(room.id))
    return ev, body


def reshow(tx: Tx, before: Event, after: Event) -> None:
    """Serve `after` in place of `before` from now on, search indexing its text."""
    # What search holds of an event is its text (store/events.py); a relation's is never.
    indexed = before.relates_to is None
    events.reshow(
        tx,
        after.id,
        _encode(after),
        before.text if indexed else "",
        after.text if indexed else "",
    )


# -- what a read shows ------------------------------------------------------------------------


def shown_edited(target: Event, text: str, at: str) -> Event:
    """The target after an edit: the latest text, marked edited."""
    return msgspec.structs.replace(target, text=text, edited=True, edited_at=at)


def shown_reacted(target: Event, member: str, emoji: str, remove: bool) -> Event:
    """The target with `member`'s `emoji` added (or taken back): one entry per emoji in
    the order first used, its members in the order they reacted; an emoji no one holds
    any more is dropped. Reacting twice, or taking back what was not there, changes
    nothing."""
    out: list[Reaction] = []
    seen = False
    for r in target.reactions:
        if r.emoji != emoji:
            out.append(r)
            continue
        seen = True
        names = [n for n in r.members if n != member] if remove else r.members
        if not remove and member not in names:
            names = [*names, member]
        if names:
            out.append(Reaction(emoji=r.emoji, count=len(names), members=names))
    if not seen and not remove:
        out.append(Reaction(emoji=emoji, count=1, members=[member]))
    return msgspec.structs.replace(target, reactions=out)


def shown_redacted(target: Event) -> Event:
    """The target after a redaction: kept (id, seq, sender, when), with no text, files,
    reactions or metadata but what the hub itself wrote (routing and receipt marks)."""
    kept = {k: v for k, v in target.metadata.items() if k in routing.SERVER_OWNED}
    return msgspec.structs.replace(
        target, text="", attachments=[], metadata=kept, reactions=[], redacted=True
    )
