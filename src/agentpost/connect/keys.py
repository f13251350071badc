"""Keys the Worker posts with (docs/connect.md): sha256 over the RFC 8785 form of a JSON
array, so a Worker restarted mid-Turn posts the reply once and no two parts collide.

A Turn's keys derive from (agent member, trigger event), not from the Worker's workspace
(docs/architecture.md#one-worker-per-agent): two Workers of one agent, or one moved to another
machine, replay each other's posts instead of posting again. Files are keyed by their content, so
a re-run that makes the same file replays it. `_ag2/deliver` part keys keep the worker id
(the seed's rule: a delivery belongs to the Worker that issued its binding).
"""

from __future__ import annotations

from agentpost.core.jcs import sha256_hex


def turn_key(member_id: str, trigger_event_id: str) -> str:
    """The Turn's reply text. Called with the worker id, it is the key Workers before the
    member-keyed rule used, looked up so an upgraded Worker does not run a Turn again."""
    return sha256_hex([member_id, trigger_event_id, "turn"])


def turn_file_key(member_id: str, trigger_event_id: str, sha256: str) -> str:
    """A file of the Turn's reply, by content (each its own media event, before the text)."""
    return sha256_hex([member_id, trigger_event_id, "file", sha256])


def turn_notice_key(member_id: str, trigger_event_id: str) -> str:
    """The one-line notice naming the files a Turn's reply could not carry."""
    return sha256_hex([member_id, trigger_event_id, "turn", "notice"])


def turn_refused_key(member_id: str, trigger_event_id: str) -> str:
    """The notice posted in place of a reply the hub refused
    (docs/architecture.md#no-turn-ends-in-silence)."""
    return sha256_hex([member_id, trigger_event_id, "turn", "refused"])


def outsider_notice_key(member_id: str, room: str, sender: str) -> str:
    """The once-per-sender-per-room notice for someone the agent does not answer."""
    return sha256_hex([member_id, room, sender, "not_admitted"])


def part_key(worker_id: str, delivery_id: str, part: int | str) -> str:
    """A part of an `_ag2/deliver` request (an index, or "notice")."""
    return sha256_hex([worker_id, delivery_id, part])
