"""Who an event wakes, and why (docs/delegation.md). Every routing rule of the hub lives in
this package; `route` is the one entry point, run inside the post's write transaction.

Order of decisions for an accepted message (the sender gate already passed):
0. `/stop` from any participant → the room's live agents (or the ones it mentions), to
   cancel their running Turn (docs/connect.md "Cancelling, permissions, time limits");
   no delegation, no router;
1. an agent's receipt (`in_reply_to` + `reply_kind` to a marked delegation) → receipts.py;
2. master mode: star topology (humans → master or fallback; sub-agents → master);
3. explicit @mentions of live members (an agent's mention of agents is a delegation);
4. a human message with no mention → the room's router policy (router.py);
5. an agent message with no mention wakes no one (no ping-pong by construction).
Every result passes the target gate: live members only; for an agent sender, current
participants only; agents a human targets are added to the room.
Then "a person who asks is told": an agent's message in reply to a live person's message
wakes that person, once per (E, replier), in every mode (answers.py).
An agent's message (and a person's call that comes back from an agent's Worker through a
remote) carries its cause (cause.py): the chain's origin and the event it descends from.
It then passes the fences (fences.py): its delegation depth against the room's
`max_delegation_depth`, its wake-ups against the origin's total, and against the room's
wake budget.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from agentpost.hub.routing import answers, cause, fences, receipts
from agentpost.hub.routing.decision import Decision, Message

__all__ = ["Decision", "Message", "route"]
from agentpost.store import members, rooms
from agentpost.store.engine import Tx
from agentpost.store.models import Member, Room

log = logging.getLogger("agentpost.hub.routing")

# Metadata only the hub writes; stripped from what clients send
# (docs/architecture.md#server-owned-metadata).
SERVER_OWNED = (
    "a2a",  # the A2A call an event is (hub/a2a): its agent and messageId
    "delegated_by",
    "delegated_to",
    "delegated_to_ids",  # the member ids of `delegated_to`: who may answer it (receipts.py)
    "receipt_from",
    "needs_input_from",
    "retention",  # an event the room's retention ended: when (docs/operations.md)
    fences.DEPTH,
)

# Metadata only the hub or an agent's own Worker writes (docs/architecture.md#server-owned-metadata:
# a notice on the page is the hub's or the Worker's, never a member's imitation): kept only on a
# post that names the agent's current Worker lease (the fence is checked in the post's transaction).
WORKER_OWNED = ("agentpost/notice",)

STOP = "/stop"

_MENTION = re.compile(r"(?<![\w@])@([a-z0-9][a-z0-9_-]{0,62})")


def strip_server_owned(metadata: dict[str, Any], worker: bool = False) -> dict[str, Any]:
    """Client metadata without what only the hub writes (and, unless the post comes from
    the agent's Worker, without what only a Worker writes)."""
    return {
        k: v
        for k, v in metadata.items()
        if k not in SERVER_OWNED and (worker or k not in WORKER_OWNED)
    }


def mentioned_names(text: str) -> list[str]:
    """`@name` mentions in order of first appearance, without duplicates."""
    if "@" not in text:
        return []
    seen: dict[str, None] = {}
    for name in _MENTION.findall(text):
        seen.setdefault(name.rstrip("-_"), None)
    return list(seen)


def live_mentions(db: Tx, sender: Member, text: str) -> list[Member]:
    """Active members of the sender's workspace that the text mentions, sender excluded.
    A removed name is no candidate anywhere (docs/delegation.md "The rules")."""
    names = [n for n in mentioned_names(text) if n != sender.name]
    found = members.live_members_named(db, sender.workspace_id, names)
    order = {n: i for i, n in enumerate(names)}
    return sorted(found, key=lambda m: order[m.name])


def delegation_marks(sender: Member, targets: list[Member]) -> dict[str, Any]:
    """`delegated_by` / `delegated_to` name the ends for people; `delegated_to_ids` are who
    may answer (a name freed by a hard removal is a new identity, docs/architecture.md#identity).
    The delegator is the event's `sender_id`."""
    agents = [m for m in targets if m.kind == "agent"]
    if not agents:
        return {}
    return {
        "delegated_by": sender.name,
        "delegated_to": [m.name for m in agents],
        "delegated_to_ids": [m.id for m in agents],
    }


def live_participant(db: Tx, room: Room, name: str | None) -> Member | None:
    if name is None:
        return None
    m = members.member_by_name(db, room.workspace_id, name)
    if m is None or m.status != "active" or not rooms.is_participant(db, room.id, m.id):
        return None
    return m


def route(tx: Tx, room: Room, sender: Member, msg: Message, router_choice: str | None) -> Decision:
    """Decide and explain; the caller writes the event, its inbox rows and the marks."""
    decision = _decide(tx, room, sender, msg, router_choice)
    if "delegated_to" not in decision.marks:  # a fence withheld the delegation (fences.py)
        decision.marks.pop("delegated_to_ids", None)
    log.debug(
        "event %s in %s from %s: route=%s targets=%s",
        msg.event_id,
        room.id,
        sender.name,
        decision.route,
        [m.name for m in decision.targets],
    )
    return decision


def _decide(
    tx: Tx, room: Room, sender: Member, msg: Message, router_choice: str | None
) -> Decision:
    mentioned = live_mentions(tx, sender, msg.text)
    if is_stop(msg.text):
        return _stop(tx, room, sender, mentioned)
    if sender.kind == "agent":
        found = cause.derive(tx, sender, msg.event_id, msg.in_reply_to, msg.trigger, room.id)
        decision = _from_agent(tx, room, sender, msg, mentioned)
        return _fenced(tx, room, sender, msg, found, decision, tell_asker=True)
    decision = _from_human(tx, room, sender, mentioned, router_choice)
    if msg.delegate:
        decision.marks = {**decision.marks, **delegation_marks(sender, decision.targets)}
    if msg.trigger is not None:
        # A person's post an agent's Worker made through a remote (an A2A bridge with the
        # person's token): it is agent traffic of that chain, fenced like the agent's own.
        parent = cause.claimed(tx, sender, msg.trigger)
        if parent is not None:
            found = cause.Cause(cause.origin_of(parent), parent, cause.TRIGGER)
            decision.mentions = [m for m in decision.targets if m.kind == "agent"]
            return _fenced(tx, room, sender, msg, found, decision, tell_asker=False)
    return decision


def _fenced(
    tx: Tx,
    room: Room,
    sender: Member,
    msg: Message,
    found: cause.Cause,
    decision: Decision,
    tell_asker: bool,
) -> Decision:
    """The fences an agent-caused event passes, in order, and its cause stamped; an
    agent's own message also tells a person it answers (answers.py)."""
    decision = fences.fence_depth(tx, room, sender, msg, decision, found.parent)
    if tell_asker:
        decision = answers.tell_asker(tx, room, sender, msg, decision)
    decision = fences.fence_origin(tx, sender, msg, decision, found.origin)
    decision = fences.fence_budget(tx, room, sender, msg, decision)
    decision.cause = found.served()
    return decision


def is_stop(text: str) -> bool:
    """`/stop`, alone or followed by mentions: cancel the running Turn
    (docs/connect.md "Cancelling, permissions, time limits")."""
    return text == STOP or text.startswith(STOP + " ")


def _stop(tx: Tx, room: Room, sender: Member, mentioned: list[Member]) -> Decision:
    agents = [m for m in rooms.live_agents(tx, room.id) if m.id != sender.id]
    if mentioned:
        named = {m.id for m in mentioned}
        agents = [m for m in agents if m.id in named]
    return Decision(agents, "stop" if agents else "stop_no_agent")


def _from_agent(
    tx: Tx, room: Room, sender: Member, msg: Message, mentioned: list[Member]
) -> Decision:
    in_room = [m for m in mentioned if rooms.is_participant(tx, room.id, m.id)]
    sub_agent_in_star = room.mode == "master" and sender.name != room.master
    if msg.in_reply_to is not None and msg.reply_kind is not None:
        found = receipts.route_receipt(
            tx,
            room,
            sender,
            msg.event_id,
            msg.in_reply_to,
            msg.reply_kind,
            onward=[] if sub_agent_in_star else in_room,
        )
        if found is not None:
            targets, reason, onward = found
            return Decision(
                targets, reason, delegation_marks(sender, onward), mentions=list(onward)
            )
    if sub_agent_in_star:
        master = live_participant(tx, room, room.master)
        # The star: a sub-agent talks to the master only; its onward mentions are ignored.
        return Decision([master], "master") if master else Decision([], "master_unavailable")
    if not in_room:
        return Decision([], "no_mention" if not mentioned else "not_participant")
    return Decision(in_room, "mention", delegation_marks(sender, in_room), mentions=in_room)


def _from_human(
    tx: Tx, room: Room, sender: Member, mentioned: list[Member], router_choice: str | None
) -> Decision:
    if room.mode == "master":
        master = live_participant(tx, room, room.master)
        if master is not None:
            return Decision([master], "master")
        # The master is gone: every live agent of the room hears it, nothing is stranded.
        fallback = [m for m in _agents(tx, room) if m.id != sender.id]
        return Decision(fallback, "master_fallback" if fallback else "master_unavailable")
    if mentioned:
        targets, joins = [], []
        for m in mentioned:
            if rooms.is_participant(tx, room.id, m.id):
                targets.append(m)
            # Agents a human targets are added to the room (docs/delegation.md "The rules").
            elif m.kind == "agent":
                targets.append(m)
                joins.append(m)
        if targets:
            return Decision(targets, "mention", joins=joins)
        return Decision([], "not_participant")
    return _router(tx, room, sender, router_choice)


def _agents(tx: Tx, room: Room) -> list[Member]:
    return rooms.live_agents(tx, room.id)


def _router(tx: Tx, room: Room, sender: Member, router_choice: str | None) -> Decision:
    """A human message with no mention: the room's router policy (router.py)."""
    if room.router == "none":
        return Decision([], "router_none")
    if room.router == "sole-agent":
        # Two are enough to know there is no sole agent (the sender is a human here).
        few = rooms.live_agents(tx, room.id, limit=2)
        return Decision(few, "sole_agent") if len(few) == 1 else Decision([], "no_sole_agent")
    candidates = [m for m in _agents(tx, room) if m.id != sender.id]
    if room.router == "llm":
        chosen = [m for m in candidates if m.name == router_choice]
        return Decision(chosen, "router") if chosen else Decision([], "router_stop")
    raise AssertionError(f"unknown router policy {room.router!r}")
