"""A2A tasks on the hub's rooms (docs/architecture.md#a2a): the room a call goes to, and a task's
state read from the delegation event, its delivery state and its receipt. Store reads and writes
only; the JSON-RPC routes are in routes.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from agentpost.core.clock import now_ms
from agentpost.core.errors import Code, RequestError
from agentpost.hub.a2a import wire
from agentpost.hub.schemas import Event
from agentpost.store import a2a, delivery, events, members, rooms
from agentpost.store.engine import Db, Tx
from agentpost.store.models import Member, Room

PUSH_KEY = "a2a:push"  # the wake-up a queued push notification commits with (push.py)
PUSH_TTL_MS = 24 * 3600 * 1000  # a notification no 2xx answered in a day is dropped (logged)
# Replies looked at for the newest `needs_input` of a task (its status message).
_SCAN = 500
_STATE_OF_KIND = {"result": wire.COMPLETED, "error": wire.FAILED, "cancelled": wire.CANCELED}


def direct_name(caller: Member, agent: Member) -> str:
    """The name of the pair's direct room: their names, then the tails of their member ids,
    so a member who takes a freed name later never finds an earlier member's room; with a
    `:`, which no name a person gives a room has, so it never collides with one."""
    return f"a2a:{caller.name}:{agent.name}:{caller.id[-6:]}{agent.id[-6:]}".lower()


def room_for(tx: Tx, caller: Member, agent: Member, context_id: str) -> Room:
    """The room a call goes to: the one `contextId` names, which both must be in, or the
    pair's direct room, made on first use with the two of them in it. A participant taken
    out of it later is not put back: the call is refused, as any post of theirs would be."""
    if context_id:
        room = _named_room(tx, caller, context_id)
    else:
        if tx.dialect == "postgres":
            # Two first calls at once on two processes: the second waits here, then finds
            # the room the first made (the name is unique per workspace).
            tx.one("SELECT id FROM members WHERE id = ? FOR UPDATE", (agent.id,))
        name = direct_name(caller, agent)
        found = rooms.room_by_name(tx, caller.workspace_id, name)
        if found is None:
            made = rooms.create_room(
                tx, caller.workspace_id, name, "channel", "dynamic", None, caller, False
            )
            assert made is not None  # looked for under the lock above
            for who in (caller, agent):
                rooms.add_participant(tx, made.id, who.id)
            return made
        room = found
    for who in (caller, agent):
        if not rooms.is_participant(tx, room.id, who.id):
            raise RequestError(
                Code.CHANNEL_MEMBERSHIP_REQUIRED, f"{who.name!r} is not in the call's room"
            )
    return room


def _named_room(db: Db, caller: Member, context_id: str) -> Room:
    """The room `contextId` names, if the caller is in it; else `room_not_found`."""
    room = rooms.room_by_id(db, context_id)
    if (
        room is None
        or room.workspace_id != caller.workspace_id
        or not rooms.is_participant(db, room.id, caller.id)
    ):
        raise RequestError(Code.ROOM_NOT_FOUND, f"no room {context_id!r} (contextId)")
    return room


def room_for_read(db: Db, caller: Member, agent: Member, context_id: str) -> None:
    """`room_for`'s refusals of a named room, in a read (before a call's files are stored)."""
    room = _named_room(db, caller, context_id)
    if not rooms.is_participant(db, room.id, agent.id):
        raise RequestError(
            Code.CHANNEL_MEMBERSHIP_REQUIRED, f"{agent.name!r} is not in the call's room"
        )


def queue_push(tx: Tx, e1: Event, event_id: str) -> None:
    """In the transaction of `event_id`, a receipt to the delegation `e1`: when `e1` is an
    A2A task, one push notification per config of it (push.py sends them)."""
    if "a2a" in e1.metadata and a2a.enqueue(tx, e1.id, event_id, now_ms(), PUSH_TTL_MS):
        tx.notify(PUSH_KEY)


def agent_of(db: Db, task_id: str) -> Member | None:
    """The agent member an A2A task was sent to (its event's `a2a` metadata), if any."""
    found = events.by_id(db, task_id)
    if found is None:
        return None
    meta = msgspec.json.decode(found[2], type=Event).metadata.get("a2a")
    if not isinstance(meta, dict) or not isinstance(meta.get("agent_id"), str):
        return None
    return members.member_by_id(db, meta["agent_id"])


def event_of(body: bytes) -> Event:
    """The event of a post's stored answer (`{"event": …}`)."""
    return msgspec.json.decode(body, type=dict[str, Event])["event"]


def task(db: Db, caller: Member, agent: Member, task_id: str, base_url: str) -> dict[str, Any]:
    """The task `task_id` as its caller sees it; TaskNotFound for anything else (no task, not
    the caller's, not this agent's), which says nothing about what exists."""
    found = events.by_id(db, task_id)
    ev = msgspec.json.decode(found[2], type=Event) if found is not None else None
    meta = ev.metadata.get("a2a") if ev is not None else None
    if (
        ev is None
        or not isinstance(meta, dict)
        or meta.get("agent_id") != agent.id
        or meta.get("caller_id") != caller.id
        or not rooms.is_participant(db, ev.room, caller.id)
    ):
        raise wire.RpcError(wire.TASK_NOT_FOUND, f"no task {task_id!r}", "task_not_found")
    now = _state(db, ev, agent, base_url)
    status: dict[str, Any] = {"state": now.state, "timestamp": now.at or ev.created_at}
    if now.message is not None:
        status["message"] = now.message
    return {
        "id": ev.id,
        "contextId": ev.room,
        "status": status,
        "artifacts": now.artifacts,
        "history": [
            {
                "messageId": str(meta.get("message_id", ev.id)),
                "taskId": ev.id,
                "contextId": ev.room,
                "role": wire.ROLE_USER,
                "parts": [wire.text_part(ev.text)],
            }
        ],
        "metadata": {"agentpost": {"room": ev.room, "seq": ev.seq, "route": ev.route}},
    }


@dataclass
class Status:
    state: str
    message: dict[str, Any] | None = None
    at: str | None = None  # when the state began, where known (the reply's time)
    artifacts: list[dict[str, Any]] = field(default_factory=list)


def _state(db: Db, ev: Event, agent: Member, base_url: str) -> Status:
    """The state of the delegation `ev` to `agent`: its receipt decides; before one, the
    delivery state (queued → SUBMITTED, read or acknowledged → WORKING)."""
    terminal, needs_input = delivery.receipts_of(db, ev.id).get(agent.name, (None, 0))
    if terminal is not None:
        reply = _event(db, terminal)
        if reply is not None:
            state = _STATE_OF_KIND.get(reply.reply_kind or "", wire.COMPLETED)
            if state == wire.COMPLETED:
                return Status(state, None, reply.created_at, [_artifact(reply, base_url)])
            return Status(state, _said(reply, ev, base_url), reply.created_at)
    if agent.name not in ev.targets:
        return Status(wire.REJECTED, _hub_says(ev, f"no one was woken (route {ev.route})"))
    row = next((r for r in delivery.targets(db, ev.room, ev.seq) if r.member == agent.name), None)
    if row is None or row.status != "active":
        return Status(wire.REJECTED, _hub_says(ev, f"{agent.name!r} was removed"))
    if needs_input:
        asked = _newest_needs_input(db, ev, agent)
        if asked is None:
            return Status(wire.INPUT_REQUIRED)
        return Status(wire.INPUT_REQUIRED, _said(asked, ev, base_url), asked.created_at)
    if row.read_at is not None or row.acked_cursor >= row.cursor:
        return Status(wire.WORKING)
    return Status(wire.SUBMITTED)


def _event(db: Db, event_id: str) -> Event | None:
    found = events.by_id(db, event_id)
    return None if found is None else msgspec.json.decode(found[2], type=Event)


def _newest_needs_input(db: Db, ev: Event, agent: Member) -> Event | None:
    newest = None
    for _seq, body in events.page(db, ev.room, ev.seq, _SCAN):
        reply = msgspec.json.decode(body, type=Event)
        if (
            reply.in_reply_to == ev.id
            and reply.sender_id == agent.id
            and reply.reply_kind == "needs_input"
        ):
            newest = reply
    return newest


def _parts(reply: Event, base_url: str) -> list[dict[str, Any]]:
    parts = [wire.text_part(reply.text)] if reply.text else []
    for a in reply.attachments:
        parts.append(wire.file_part(f"{base_url}/v1/media/{a.id}", a.name, a.mime_type))
    return parts


def _artifact(reply: Event, base_url: str) -> dict[str, Any]:
    return {"artifactId": reply.id, "name": "reply", "parts": _parts(reply, base_url)}


def _said(reply: Event, ev: Event, base_url: str) -> dict[str, Any]:
    return wire.agent_message(reply.id, ev.id, ev.room, _parts(reply, base_url))


def _hub_says(ev: Event, text: str) -> dict[str, Any]:
    return wire.agent_message(ev.id + "-hub", ev.id, ev.room, [wire.text_part(text)])


def agent_named(db: Db, caller: Member, name: str) -> Member:
    """The live agent member `name` of the caller's workspace; 404 otherwise."""
    found = members.member_by_name(db, caller.workspace_id, name)
    if found is None or found.kind != "agent" or found.status != "active":
        raise RequestError(Code.MEMBER_NOT_FOUND, f"no agent {name!r} in this workspace")
    return found
