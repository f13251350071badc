"""Timestamps that pace the hooks: the last hook sync, the last publish, a pending push.

Kept in `.git/agentpost/state.json` by atomic replace. They only decide *when* to do
work, never *what* is owed, so an unreadable file means "do the work now".
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import msgspec

from agentpost.mail.clock import format_ts, parse_ts
from agentpost.mail.fsio import atomic_write


class Marks(msgspec.Struct):
    hook_sync_at: str | None = None
    published_at: str | None = None
    push_pending: bool = False

    def since_hook_sync(self, now: datetime) -> float | None:
        return _seconds_since(self.hook_sync_at, now)

    def since_publish(self, now: datetime) -> float | None:
        return _seconds_since(self.published_at, now)


def load_marks(path: Path) -> Marks:
    try:
        return msgspec.json.decode(path.read_bytes(), type=Marks)
    except FileNotFoundError:
        return Marks()
    except msgspec.DecodeError:
        print(
            f"agentpost mail: {path} unreadable; treating every interval as elapsed",
            file=sys.stderr,
        )
        return Marks()


def save_marks(path: Path, marks: Marks) -> None:
    atomic_write(path, msgspec.json.encode(marks))


def _seconds_since(stamp: str | None, now: datetime) -> float | None:
    if stamp is None:
        return None
    try:
        return (now - parse_ts(stamp)).total_seconds()
    except ValueError:
        return None


def stamp(now: datetime) -> str:
    return format_ts(now)
