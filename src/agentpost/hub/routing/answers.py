"""A person who asks is told (docs/delegation.md): an agent's message with `in_reply_to` = a
message of a live person (a human member, current participant) wakes that person, once per
(E, replier), in every mode. It is no receipt (no `reply_kind` needed) and changes none of
the agent-to-agent rules: the person is added to whatever the agent's message routed to.
The person is the replied event's `sender_id` (docs/architecture.md#identity): a member who took
the name after a hard removal is not told what was answered to the old one.
"""

from __future__ import annotations

import msgspec

from agentpost.hub.routing import fences
from agentpost.hub.routing.decision import Decision, Message
from agentpost.hub.schemas import Event
from agentpost.store import events, members, receipts, rooms
from agentpost.store.engine import Tx
from agentpost.store.models import Member, Room


def tell_asker(tx: Tx, room: Room, replier: Member, msg: Message, decision: Decision) -> Decision:
    if msg.in_reply_to is None:
        return decision
    found = events.by_id(tx, msg.in_reply_to)
    if found is None or found[0] != room.id:
        return decision
    asked = msgspec.json.decode(found[2], type=Event)
    if asked.sender_kind != "human":
        return decision
    if asked.sender_id is not None:
        person = members.member_by_id(tx, asked.sender_id)
    else:  # an event stored before sender_id: its name is all there is
        person = members.member_by_name(tx, room.workspace_id, asked.sender)
    if person is None or any(m.id == person.id for m in decision.targets):
        return decision
    if person.status != "active" or person.kind != "human":
        return decision
    if not rooms.is_participant(tx, room.id, person.id):
        return decision
    if not receipts.claim_answer(tx, asked.id, replier.name, msg.event_id):
        return decision
    # A fenced message keeps its fence's route: that is what a reader needs explained.
    fenced = decision.route in (fences.DEPTH_LIMIT, fences.WAKE_BUDGET)
    route = decision.route if decision.targets or fenced else "answer"
    decision.targets = [*decision.targets, person]
    decision.route = route
    return decision
