"""What the agent says through the AG2 relay profile (docs/architecture.md#ag2-relay-profile,
docs/ag2.md): a task's result, a dead-letter, and a room op's message, each posted through the
hub's own posting path (gates, routing, receipts, the sensitive-data filter) inside the request's
transaction.

A result answers the task's event: a delegation gets a receipt (`reply_kind` result, or error for a
dead-letter), a person's message a plain reply that wakes them once ("a person who asks is told",
docs/architecture.md#receipts). The result markers are read here: `[no-send]`, `[REPLIED]` and
`[deduped: id]` at the start complete the task with no post (a delegation still gets its receipt
after `[REPLIED]`: the text that follows the marker, or a pointer to the reply); `[channel: !room]`
on the first line posts in that room instead (plain, when the agent takes part in it; otherwise the
answer stays in the task's room); `[dm-only]` anywhere forbids that redirect and is taken out when
alone on its line. Text longer than `CHUNK_CHARS` is posted in several messages, the first one
answering the task.

A room op's message in a room where the agent's task is out answers that task: the first
one (the Worker's placeholder) is posted as the reply to the task's event, and later ones
are plain messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agentpost.core.errors import Code, RequestError
from agentpost.core.ids import new_id
from agentpost.hub import posting
from agentpost.hub.ag2 import tasks
from agentpost.hub.idempotency import Created
from agentpost.hub.notify import room_key
from agentpost.hub.routing import fences
from agentpost.hub.schemas import Event
from agentpost.store import ag2, events, inbox, rooms
from agentpost.store.ag2 import DONE, Task
from agentpost.store.engine import Tx
from agentpost.store.models import Member

CHUNK_CHARS = 60_000
OK = b'{"ok":true,"duplicate":false}'
DUPLICATE = b'{"ok":true,"duplicate":true}'
REPLIED_POINTER = "(answered in the room: {event})"
REJECTED_RECEIPT = "{agent} rejected this task ({code})."
REJECTED_NOTICE = "{agent} could not answer this message ({code})."

_SKIPS = (
    (re.compile(r"^\s*\[no-send\]\s*", re.IGNORECASE), "no-send"),
    (re.compile(r"^\s*\[REPLIED\]\s*"), "REPLIED"),
    (re.compile(r"^\s*\[deduped:\s*([^\]]+)\]\s*", re.IGNORECASE), "deduped"),
)
_REDIRECT = re.compile(r"^\s*\[channel:\s*([^\]]+)\]\s*\n?")
_DM_ONLY = re.compile(r"\[dm-only\]", re.IGNORECASE)
_DM_ONLY_LINE = re.compile(r"^[ \t]*\[dm-only\][ \t]*\r?\n?", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Markers:
    """A result body as the deliverer reads it."""

    text: str
    skip: str = ""
    redirect: str = ""


def read_markers(body: str) -> Markers:
    for pattern, reason in _SKIPS:
        found = pattern.match(body)
        if found:
            return Markers(text=body[found.end() :].strip(), skip=reason)
    dm_only = bool(_DM_ONLY.search(body))
    text = _DM_ONLY_LINE.sub("", body) if dm_only else body
    redirect = ""
    found = _REDIRECT.match(text)
    if found:
        redirect = "" if dm_only else found.group(1).strip()
        text = text[found.end() :]
    return Markers(text=text.strip(), redirect=redirect)


def chunks(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """`text` in pieces of at most `size` characters, cut at a paragraph, a line or a
    space when there is one in the second half of the piece."""
    out = []
    while len(text) > size:
        head = text[:size]
        cut = max(head.rfind("\n\n"), head.rfind("\n"), head.rfind(" "))
        cut = cut if cut > size // 2 else size
        out.append(text[:cut].rstrip())
        text = text[cut:].lstrip()
    if text:
        out.append(text)
    return out


def is_delegation(ev: Event, member: Member) -> bool:
    to = ev.metadata.get("delegated_to")
    return isinstance(to, list) and member.name in to


def post(
    tx: Tx,
    room_id: str,
    member: Member,
    text: str,
    in_reply_to: str | None = None,
    reply_kind: str | None = None,
) -> Created:
    """A message of the agent, through the hub's posting path (gates, routing, filter)."""
    normalized: dict[str, Any] = {
        "text": text,
        "metadata": {},
        "in_reply_to": in_reply_to,
        "reply_kind": reply_kind,
        "attachments": [],
    }
    return posting.create_message(tx, room_id, member, normalized)


def task_of(tx: Tx, member: Member, task_id: str) -> Task:
    t = ag2.get(tx, member.id, task_id)
    if t is None:
        raise RequestError(
            Code.TASK_NOT_FOUND, f"no task {task_id!r} for you: it is not leased to you"
        )
    return t


def finished_long_ago(tx: Tx, member: Member, task_id: str) -> bool:
    """A task the hub no longer keeps (finished tasks are forgotten after the key lifetime,
    store/retention.py) whose wake-up the member's inbox shows handed in and acknowledged:
    it was done, so a result for it now is a duplicate, not an unknown task."""
    found = events.by_id(tx, task_id)
    if found is None:
        return False
    return inbox.acked_row(tx, member.id, found[0], found[1])


def _known(tx: Tx, member: Member, task_id: str) -> Task | None:
    """The task, or None when it is one finished long ago (`finished_long_ago`)."""
    t = ag2.get(tx, member.id, task_id)
    if t is not None or finished_long_ago(tx, member, task_id):
        return t
    return task_of(tx, member, task_id)  # raises: never this member's task


def result(tx: Tx, member: Member, task_id: str, body: str, now: int) -> Created:
    """`POST /v1/results` with a body: post the answer (see the module), complete the task.
    A task answered before is a duplicate: nothing is posted, the first answer stays (also
    past the key lifetime, when the hub has forgotten the finished task)."""
    ag2.lock_poller(tx, member.id)
    t = _known(tx, member, task_id)
    if t is None:
        return Created(200, DUPLICATE, None, None)
    if t.state == DONE:
        return Created(200, DUPLICATE, t.room_id, None)
    ev = tasks.event_of(tx, t.event_id)
    made = _answer(tx, member, t, ev, read_markers(body)) if ev is not None else None
    tasks.complete(tx, member, t, now)
    return Created(200, OK, made.room_id if made else t.room_id, made.event_id if made else None)


def rejected(tx: Tx, member: Member, task_id: str, code: str, now: int) -> Created:
    """`POST /v1/results` with `status: rejected`: a delegation gets an error receipt, a
    person's message a hub notice under it; the task is complete."""
    ag2.lock_poller(tx, member.id)
    t = _known(tx, member, task_id)
    if t is None:
        return Created(200, DUPLICATE, None, None)
    if t.state == DONE:
        return Created(200, DUPLICATE, t.room_id, None)
    ev = tasks.event_of(tx, t.event_id)
    made = None
    if ev is not None and is_delegation(ev, member):
        text = REJECTED_RECEIPT.format(agent=member.name, code=code)
        made = post(tx, t.room_id, member, text, ev.id, "error")
    elif ev is not None:
        notice_about(tx, t, REJECTED_NOTICE.format(agent=member.name, code=code))
    tasks.complete(tx, member, t, now)
    return Created(200, OK, t.room_id, made.event_id if made else None)


def refused(tx: Tx, member: Member, task_id: str, reason: str, now: int) -> bool:
    """A result the room refused for its content (the sensitive-data filter): the task is
    complete, and a notice under its message says the answer was refused. False when the
    task was complete already."""
    ag2.lock_poller(tx, member.id)
    t = task_of(tx, member, task_id)
    if t.state == DONE:
        return False
    notice_about(tx, t, f"{member.name}'s answer was refused by this room ({reason}).")
    tasks.complete(tx, member, t, now)
    return True


def notice_about(tx: Tx, t: Task, text: str) -> None:
    room = rooms.room_by_id(tx, t.room_id)
    if room is None:
        return
    rooms.lock(tx, room.id)
    posting.append_notice(tx, room, fences.Notice(new_id("ev"), text), about=t.event_id)
    tx.notify(room_key(room.id))


def _answer(tx: Tx, member: Member, t: Task, ev: Event, marked: Markers) -> Created | None:
    delegation = is_delegation(ev, member)
    kind = "result" if delegation else None
    if marked.skip:
        if marked.skip != "REPLIED" or not delegation:
            return None
        text = marked.text or REPLIED_POINTER.format(event=t.reply_event or "none")
        return _post_chunks(tx, t.room_id, member, text, ev.id, kind)
    room_id: str = t.room_id
    reply_to: str | None = ev.id
    if marked.redirect and not delegation:
        target = _redirect_room(tx, member, marked.redirect)
        if target is not None and target != t.room_id:
            room_id, reply_to = target, None
    if not marked.text:
        return None
    return _post_chunks(tx, room_id, member, marked.text, reply_to, kind if reply_to else None)


def _post_chunks(
    tx: Tx, room_id: str, member: Member, text: str, reply_to: str | None, kind: str | None
) -> Created:
    parts = chunks(text)
    first = post(tx, room_id, member, parts[0], reply_to, kind)
    for part in parts[1:]:
        post(tx, room_id, member, part)
    return first


def _redirect_room(tx: Tx, member: Member, wire: str) -> str | None:
    """The room a `[channel: !room]` names, if the agent may post there now."""
    if not wire.startswith("!"):
        return None
    found = rooms.room_for_member(tx, wire[1:], member.id)
    if found is None:
        return None
    room, participant, _status = found
    if room.workspace_id != member.workspace_id or not participant or room.archived:
        return None
    return room.id


@dataclass(frozen=True)
class Reuse:
    """A room op's message that is a re-served task's first: it edits `reply_event`, the
    reply an earlier attempt posted, instead of posting a second one."""

    task: Task
    reply_event: str


def room_message(tx: Tx, member: Member, room_id: str, text: str) -> Created | Reuse:
    """A room op's `message`: the first one in a room where the agent's task is out answers
    that task (it is the Worker's placeholder); the first one of a later attempt of that
    task reuses the earlier attempt's reply (`Reuse`); any other is a plain message."""
    ag2.lock_poller(tx, member.id)
    t = tasks.linked_task(tx, member, room_id)
    if t is not None and t.reply_event is not None and t.attempt > t.reply_attempt:
        return Reuse(t, t.reply_event)
    if t is None or t.reply_event is not None:
        return post(tx, room_id, member, text)
    made = post(tx, room_id, member, text, t.event_id)
    assert made.event_id is not None
    ag2.link_reply(tx, t, made.event_id, t.attempt)
    return made


def relink(tx: Tx, member: Member, reuse: Reuse) -> None:
    """The reused reply now belongs to the task's current attempt."""
    ag2.lock_poller(tx, member.id)
    t = ag2.get(tx, member.id, reuse.task.event_id)
    if t is not None:
        ag2.link_reply(tx, t, reuse.reply_event, t.attempt)
