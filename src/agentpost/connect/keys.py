"""Keys the Worker posts with (docs/connect.md): sha256 over the RFC 8785 form of a JSON
array, so a Worker restarted mid-Turn posts the reply once and no two parts collide."""

from __future__ import annotations

from agentpost.core.jcs import sha256_hex


def turn_key(worker_id: str, trigger_event_id: str) -> str:
    return sha256_hex([worker_id, trigger_event_id, "turn"])


def turn_file_key(worker_id: str, trigger_event_id: str, index: int) -> str:
    """A file of the Turn's reply, posted before the text (each its own media event)."""
    return sha256_hex([worker_id, trigger_event_id, "turn", index])


def turn_notice_key(worker_id: str, trigger_event_id: str) -> str:
    """The one-line notice naming the files a Turn's reply could not carry."""
    return sha256_hex([worker_id, trigger_event_id, "turn", "notice"])


def outsider_notice_key(worker_id: str, room: str, sender: str) -> str:
    """The once-per-sender-per-room notice for someone the agent does not answer."""
    return sha256_hex([worker_id, room, sender, "not_admitted"])


def part_key(worker_id: str, delivery_id: str, part: int | str) -> str:
    """A part of an `_ag2/deliver` request (an index, or "notice")."""
    return sha256_hex([worker_id, delivery_id, part])
