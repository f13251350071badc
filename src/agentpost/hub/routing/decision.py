"""What routing decides, as data (docs/delegation.md): the message as routing sees it, the
decision the rules build up (who is woken, why, the marks and notices), and a hub notice.
A module of its own so that every rule module (fences, receipts, answers) and the package
that runs them import it, and none imports the other back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentpost.hub.schemas import EventCause
from agentpost.store.models import Member


@dataclass(frozen=True)
class Notice:
    """A hub notice to post right after the event, in its transaction (type `notice`)."""

    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class Decision:
    """The routing outcome: who is woken, the reason (`route`), server-owned marks for this
    event, agents a human targeted that join the room, the targets an agent's own mentions
    woke (what the fences withhold), and hub notices to post after the event."""

    targets: list[Member]
    route: str
    marks: dict[str, Any] = field(default_factory=dict)
    joins: list[Member] = field(default_factory=list)
    mentions: list[Member] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    cause: EventCause | None = None  # an agent-caused event's cause (cause.py)


@dataclass(frozen=True)
class Message:
    event_id: str
    text: str
    in_reply_to: str | None
    reply_kind: str | None
    # An A2A `SendMessage` (hub/a2a): a delegation to the agents it names, whoever sends it,
    # so a person's call is marked too and its answer is a receipt (docs/architecture.md#a2a).
    delegate: bool = False
    # The event the post says it serves: the trigger of the Worker's Turn (taken from a
    # post fenced by the Worker's lease) or of an agent's A2A call that comes back as a
    # person's (hub/a2a). Taken only if that event woke the sender (cause.py).
    trigger: str | None = None


