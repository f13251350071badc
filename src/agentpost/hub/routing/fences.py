"""Depth and budget (docs/delegation.md, docs/architecture.md#depth-and-budget): whatever agents
write, one human message causes a bounded amount of traffic.

- Every agent-caused routed event carries a server-owned `delegation_depth` (absent: 0, a
  person's message or a message in no chain): a delegation is one deeper than the event it
  answers (`in_reply_to`), any other agent message that wakes someone (a receipt above all)
  is as deep as the event it answers. So a receipt is as deep as its delegation, and an
  agent woken by a receipt or a delegation that delegates again goes one deeper: two agents
  that quote each other's mentions go one deeper every round.
- Past the room's `max_delegation_depth`, an agent's mentions wake no one (route
  `depth_limit`), and the room gets one notice per chain (the chain's first event keys it).
- Every agent-caused wake-up spends the room's budget per window (a minute); once spent, an
  agent's mentions wake no one until the next window (route `wake_budget`), one notice per
  window. Receipts and answers to a person are never withheld: each answers work already
  asked for, so no fence is needed to bound them.
"""

from __future__ import annotations

import os

import msgspec

from agentpost.core.clock import now_ms
from agentpost.core.ids import new_id
from agentpost.hub.routing.decision import Decision, Message, Notice
from agentpost.hub.schemas import Event
from agentpost.store import events
from agentpost.store import fences as store
from agentpost.store.engine import Tx
from agentpost.store.models import Member, Room

__all__ = ["Notice", "fence_budget", "fence_depth", "fence_origin"]


DEPTH = "delegation_depth"
DEPTH_LIMIT = "depth_limit"
WAKE_BUDGET = "wake_budget"
ORIGIN_LIMIT = "origin_limit"
NOTICE_SENDER = "agentpost"
# The budget's window; a test shortens it so that it need not wait a minute.
WINDOW_ENV = "AGENTPOST_WAKE_WINDOW_SECONDS"
# The agent wake-ups one origin may cause, over every path and room (docs/delegation.md
# "Cause"); a hub setting, read at each post so a test or an operator may change it.
ORIGIN_ENV = "AGENTPOST_ORIGIN_WAKEUPS"
DEFAULT_ORIGIN_WAKEUPS = 24
MAX_DEPTH_LIMIT = 100
MAX_WAKEUPS_LIMIT = 100_000


def depth_of(ev: Event | None) -> int:
    found = ev.metadata.get(DEPTH) if ev is not None else None
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else 0


def fence_depth(
    tx: Tx, room: Room, sender: Member, msg: Message, decision: Decision, parent: Event | None
) -> Decision:
    """Stamp the depth, one deeper than `parent` (the event this one descends from: its
    cause, hub/routing/cause.py) for a delegation; past the room's limit, withhold what the
    agent's mentions woke."""
    delegating = bool(decision.marks.get("delegated_to"))
    if not (decision.targets or delegating):
        return decision  # wakes no one: no depth to carry
    depth = depth_of(parent) + (1 if delegating else 0)
    if depth == 0:
        return decision
    decision.marks[DEPTH] = depth
    if not delegating or depth <= room.max_delegation_depth:
        return decision
    _withhold(decision, DEPTH_LIMIT)
    notice = Notice(
        new_id("ev"),
        f"Delegation depth limit: {sender.name}'s message would delegate at depth {depth} "
        f"(this room allows {room.max_delegation_depth}), so its mentions woke no one. "
        "Agents in this chain will not wake each other again; a person can start anew.",
        {
            "agentpost/notice": DEPTH_LIMIT,
            "stopped_event": msg.event_id,
            DEPTH: depth,
            "max_delegation_depth": room.max_delegation_depth,
        },
    )
    chain = _chain_start(tx, room, parent, msg.event_id)
    if store.claim_depth_notice(tx, room.id, chain, notice.id):
        decision.notices.append(notice)
    return decision


def fence_origin(
    tx: Tx, sender: Member, msg: Message, decision: Decision, origin: str
) -> Decision:
    """Spend the origin's total (docs/delegation.md "Cause"): the agent wake-ups one
    person's message (or one unprompted start) may cause, over every path and room, never
    refilled by time. Once spent, the agent's mentions of agents wake no one (route
    `origin_limit`) and the chain gets one notice, in the room where it was stopped."""
    mentioned = {m.id for m in decision.mentions if m.kind == "agent"}
    fenced = sum(1 for m in decision.targets if m.id in mentioned)
    if fenced == 0:
        return decision
    total = origin_wakeups()
    if store.spend_origin(tx, origin, fenced, total, now_ms()):
        return decision
    _withhold(decision, ORIGIN_LIMIT)
    notice = Notice(
        new_id("ev"),
        f"Chain stopped: the message this chain began with has caused {total} agent "
        f"wake-ups already, all this hub allows one message, so {sender.name}'s mentions "
        "woke no one. Agents in this chain will not wake each other again; a person can "
        "start anew.",
        {
            "agentpost/notice": ORIGIN_LIMIT,
            "stopped_event": msg.event_id,
            "origin": origin,
            "origin_wakeups": total,
        },
    )
    if store.claim_origin_notice(tx, origin, notice.id):
        decision.notices.append(notice)
    return decision


# An origin's total is kept this long after its chain began, then forgotten by the sweep
# (a chain still running a month later counts anew); a busy hub keeps one small row each.
ORIGIN_KEEP_MS = 30 * 86_400_000


def forget_origins(tx: Tx, now: int, limit: int = 1000) -> int:
    """The sweep's part: origin totals older than `ORIGIN_KEEP_MS`, at most `limit`."""
    return store.forget_origins(tx, now - ORIGIN_KEEP_MS, limit)


def origin_wakeups() -> int:
    raw = os.environ.get(ORIGIN_ENV, "")
    try:
        found = int(raw) if raw else DEFAULT_ORIGIN_WAKEUPS
    except ValueError:
        found = DEFAULT_ORIGIN_WAKEUPS
    return found if found >= 0 else DEFAULT_ORIGIN_WAKEUPS


def fence_budget(tx: Tx, room: Room, sender: Member, msg: Message, decision: Decision) -> Decision:
    """Spend the room's wake budget; once spent, withhold what the agent's mentions woke."""
    if not decision.targets:
        return decision
    window_ms = window_seconds_ms()
    window = now_ms() // window_ms * window_ms
    mentioned = {m.id for m in decision.mentions if m.kind == "agent"}
    fenced = sum(1 for m in decision.targets if m.id in mentioned)
    spent = store.spend_wakeups(
        tx, room.id, window, len(decision.targets), fenced, room.agent_wakeups_per_minute
    )
    if spent.admitted:
        return decision
    _withhold(decision, WAKE_BUDGET)
    if spent.notice_due:
        seconds = window_ms / 1000
        decision.notices.append(
            Notice(
                new_id("ev"),
                f"Wake budget spent: agents in this room woke others "
                f"{room.agent_wakeups_per_minute} times within {seconds:g} s, so "
                f"{sender.name}'s mentions woke no one. Agents' mentions wake again in the "
                "next window; receipts and answers to people still arrive.",
                {
                    "agentpost/notice": WAKE_BUDGET,
                    "stopped_event": msg.event_id,
                    "agent_wakeups_per_minute": room.agent_wakeups_per_minute,
                    "window_start_ms": window,
                },
            )
        )
    return decision


def window_seconds_ms() -> int:
    raw = os.environ.get(WINDOW_ENV, "")
    try:
        seconds = float(raw) if raw else 60.0
    except ValueError:
        seconds = 60.0
    return max(1, int(seconds * 1000)) if seconds > 0 else 60_000


def _withhold(decision: Decision, route: str) -> None:
    """The agent's own mentions of agents wake no one and make no delegation; a receipt to
    the delegator, an answer to a person, and a person it mentions still get it (people
    are never part of a runaway loop: they answer when they choose)."""
    mentioned = {m.id for m in decision.mentions if m.kind == "agent"}
    decision.targets = [m for m in decision.targets if m.id not in mentioned]
    decision.mentions = [m for m in decision.mentions if m.kind != "agent"]
    decision.marks.pop("delegated_by", None)
    decision.marks.pop("delegated_to", None)
    decision.route = route


def _event(tx: Tx, room: Room, event_id: str | None) -> Event | None:
    if event_id is None:
        return None
    found = events.by_id(tx, event_id)
    if found is None or found[0] != room.id:
        return None
    return msgspec.json.decode(found[2], type=Event)


def _chain_start(tx: Tx, room: Room, parent: Event | None, event_id: str) -> str:
    """The first event of the chain: up along `in_reply_to` to the first event with no
    depth (a person's message) or with no `in_reply_to`. Depth rises at least every other
    hop of a chain that wakes agents, so the walk is bounded by the room's limit."""
    node = parent
    if node is None:
        return event_id
    for _ in range(4 * (room.max_delegation_depth + 4)):
        if depth_of(node) == 0 or node.in_reply_to is None:
            break
        up = _event(tx, room, node.in_reply_to)
        if up is None:
            break
        node = up
    return node.id
