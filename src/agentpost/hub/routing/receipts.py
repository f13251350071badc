"""Delegation receipts (docs/delegation.md): a reply that reports delegated work back.

A message with `in_reply_to` = E1 and a `reply_kind` is a receipt when E1 is in the same
room, E1 is marked (`delegated_by`), the replier is in E1's `delegated_to`, and the replier
is a live participant (the sender gate saw to that). It routes to the delegator
deterministically, never through the router, under E1's row lock. Both ends are member ids
(docs/architecture.md#identity): the delegator is E1's `sender_id`, the replier one of E1's
`delegated_to_ids` (the members who held those names when E1 was posted), so a member who
takes a name freed by a hard removal neither answers the old delegation nor hears its
receipt. An E1 stored before the ids falls back to its names.
- result / error / cancelled take the (E1, replier) terminal slot at most once;
- needs_input does not; at most NEEDS_INPUT_LIMIT wake-ups per (E1, replier);
- a duplicate, a needs_input past the limit, or a gone delegator suppresses the delegator,
  while explicit onward mentions of live participants are still honoured (and marked);
- no TTL: a result days later still delivers once.
"""

from __future__ import annotations

from typing import Any

import msgspec

from agentpost.hub.a2a import tasks as a2a_tasks
from agentpost.hub.schemas import Event
from agentpost.store import events, members, receipts, rooms
from agentpost.store.engine import Tx
from agentpost.store.models import Member, Room

TERMINAL = ("result", "error", "cancelled")
NEEDS_INPUT = "needs_input"
NEEDS_INPUT_LIMIT = 3


def route_receipt(
    tx: Tx,
    room: Room,
    replier: Member,
    event_id: str,
    e1_id: str,
    kind: str,
    onward: list[Member],
) -> tuple[list[Member], str, list[Member]] | None:
    """(targets, route, onward delegates) for a receipt; None when this is no receipt (it
    then routes as a plain message)."""
    locked = events.lock(tx, e1_id)
    if locked is None or locked[0] != room.id:
        return None
    e1 = msgspec.json.decode(locked[2], type=Event)
    delegator_name = e1.metadata.get("delegated_by")
    if not isinstance(delegator_name, str) or not _delegated_to(e1, replier):
        return None
    delegator = _delegator(tx, room, e1, delegator_name)
    if e1.sender_id is not None:
        onward = [m for m in onward if m.id != e1.sender_id]
    else:
        onward = [m for m in onward if m.name != delegator_name]
    if delegator is None:
        return onward, "receipt_undeliverable", onward
    if kind in TERMINAL:
        if not receipts.claim_terminal(tx, e1_id, replier.name, event_id):
            return onward, "receipt_duplicate", onward
        _stamp(tx, e1, "receipt_from", lambda old: _append(old, replier.name))
        a2a_tasks.queue_push(tx, e1, event_id)
        return [delegator, *onward], "receipt", onward
    count = receipts.count_needs_input(tx, e1_id, replier.name, NEEDS_INPUT_LIMIT)
    if count is None:
        return onward, "needs_input_limit", onward
    _stamp(tx, e1, "needs_input_from", lambda old: {**(old or {}), replier.name: count})
    a2a_tasks.queue_push(tx, e1, event_id)
    return [delegator, *onward], "receipt", onward


def _delegated_to(e1: Event, replier: Member) -> bool:
    """Whether E1 delegated to this member: by id; by name only for an E1 stored before
    `delegated_to_ids`."""
    ids = e1.metadata.get("delegated_to_ids")
    if isinstance(ids, list):
        return replier.id in ids
    names = e1.metadata.get("delegated_to")
    return isinstance(names, list) and replier.name in names


def _delegator(tx: Tx, room: Room, e1: Event, name: str) -> Member | None:
    """E1's sender, if still a live participant: by `sender_id` (by name only for an E1
    stored without one)."""
    if e1.sender_id is not None:
        m = members.member_by_id(tx, e1.sender_id)
    else:
        m = members.member_by_name(tx, room.workspace_id, name)
    if m is None or m.status != "active" or not rooms.is_participant(tx, room.id, m.id):
        return None
    return m


def _append(old: Any, name: str) -> list[str]:
    names = list(old) if isinstance(old, list) else []
    return names if name in names else [*names, name]


def _stamp(tx: Tx, e1: Event, key: str, update: Any) -> None:
    """Record on E1 who reported back (server-owned metadata, visible to readers)."""
    metadata = {**e1.metadata, key: update(e1.metadata.get(key))}
    events.replace_body(
        tx, e1.id, msgspec.json.encode(msgspec.structs.replace(e1, metadata=metadata))
    )
