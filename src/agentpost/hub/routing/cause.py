"""One cause per event (docs/delegation.md "Cause", docs/architecture.md#cause).

Depth alone is blind to an agent message that answers nothing (a delivery, an MCP post, a
plain post, an A2A call): every hop would be depth 1 again. So every event an agent's token
makes, by any path, carries a server-owned cause: the chain's origin (the person's message
it descends from, or the agent's own unprompted start) and the event it descends from (its
parent, which gives its depth). The hub derives it, in this order, and never trusts a
client for it:

1. `in_reply_to`: the replied event's origin (a person's message is an origin itself);
2. the trigger the agent's Worker says it is serving (a Turn's reply, a delivery: the
   Turn that issued its binding), taken only on a post fenced by the Worker's current lease
   and only when that event really woke this agent;
3. the agent's latest wake-up (its newest inbox row);
4. else the event itself: an unprompted start, an origin of its own.

A call that comes back through a remote (an A2A bridge calling this hub as a person)
carries the cause of the Turn that made it, checked the same way (rule 2).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from agentpost.hub.schemas import Event, EventCause
from agentpost.store import events, inbox
from agentpost.store.engine import Tx
from agentpost.store.models import Member

IN_REPLY_TO = "in_reply_to"
TRIGGER = "trigger"
WAKE_UP = "wake_up"
START = "start"


@dataclass(frozen=True, slots=True)
class Cause:
    """Where an event comes from: its chain's origin (an event id), the event it descends
    from (None for a start), and by which rule the hub knew it (`via`)."""

    origin: str
    parent: Event | None
    via: str

    def served(self) -> EventCause:
        return EventCause(origin=self.origin, via=self.via)


def origin_of(ev: Event) -> str:
    """The origin an event carries; an event with none (a person's message, an event from
    before causes were kept) is an origin itself."""
    return ev.cause.origin if ev.cause is not None else ev.id


def derive(
    tx: Tx,
    sender: Member,
    event_id: str,
    in_reply_to: str | None,
    trigger: str | None,
    room_id: str,
) -> Cause:
    """The cause of a new event `event_id` by `sender` (an agent, or a person's post that
    names a trigger it may claim). `in_reply_to` was checked to be an event of the room."""
    if in_reply_to is not None:
        parent = _event(tx, in_reply_to, room_id)
        if parent is not None:
            return Cause(origin_of(parent), parent, IN_REPLY_TO)
    if trigger is not None:
        parent = _woke(tx, sender, trigger)
        if parent is not None:
            return Cause(origin_of(parent), parent, TRIGGER)
    if sender.kind == "agent":
        latest = inbox.latest_wakeup(tx, sender.id)
        if latest is not None:
            parent = msgspec.json.decode(latest, type=Event)
            return Cause(origin_of(parent), parent, WAKE_UP)
    return Cause(event_id, None, START)


def claimed(tx: Tx, member: Member, trigger: str) -> Event | None:
    """The trigger a person's post names (an agent's call through a remote, made with the
    person's token), if it woke an agent of the person's workspace; else None. Taking it
    only fences the post more: it spends that chain's total instead of starting anew."""
    found = events.by_id(tx, trigger)
    if found is None or not inbox.woke_agent_of(tx, member.workspace_id, found[0], found[1]):
        return None
    return msgspec.json.decode(found[2], type=Event)


def _woke(tx: Tx, member: Member, event_id: str) -> Event | None:
    found = events.by_id(tx, event_id)
    if found is None or not inbox.woke(tx, member.id, found[0], found[1]):
        return None
    return msgspec.json.decode(found[2], type=Event)


def _event(tx: Tx, event_id: str, room_id: str) -> Event | None:
    found = events.by_id(tx, event_id)
    if found is None or found[0] != room_id:
        return None
    return msgspec.json.decode(found[2], type=Event)
