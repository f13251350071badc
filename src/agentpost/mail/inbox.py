"""A session's inbox: one directory per instance, maildir style (docs/mail.md).

`tmp/` → `new/` (unread, counted against capacity) → `cur/` (read). A message file
is named `<id>@<sender machine>.json` and created once: a second delivery of the same
note is a duplicate and changes nothing, so delivery is at-least-once into a
deduplicating inbox. Two machines' notes that share an id are two files, so neither
can stand in for the other. Files named `<id>.json` by earlier versions are renamed
to that form on first use; one that cannot be read stops the inbox (fail closed).
"""

from __future__ import annotations

import enum
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from agentpost.mail.clock import parse_ts
from agentpost.mail.errors import InvalidName, StateUnreadable
from agentpost.mail.fsio import ensure_dir, fsync_dir
from agentpost.mail.limits import inbox_capacity
from agentpost.mail.repo import check_name


class InboxMessage(msgspec.Struct, frozen=True):
    id: str
    sender: dict[str, Any] = msgspec.field(name="from")
    to: dict[str, Any] = msgspec.field(name="to")
    body: str = ""
    sent_at: str = ""
    expires_at: str = ""
    received_at: str = ""

    @classmethod
    def from_envelope(cls, raw: dict[str, Any], received_at: str) -> InboxMessage:
        """The inbox copy of an envelope already judged acceptable."""
        return cls(
            id=raw["id"],
            sender=raw["from"],
            to=raw["to"],
            body=raw["body"],
            sent_at=raw["sent_at"],
            expires_at=raw["expires_at"],
            received_at=received_at,
        )

    @property
    def key(self) -> tuple[str, str]:
        """(sender machine, id): what names this message in the inbox, dedup and acks."""
        return str(self.sender.get("machine")), self.id


def _file_name(machine: str, msg_id: str) -> str:
    return f"{msg_id}@{machine}.json"


class Delivery(enum.Enum):
    DELIVERED = "delivered"
    DUPLICATE = "duplicate"
    FULL = "full"


class Inbox:
    """The inbox of one session instance on this machine."""

    def __init__(self, root: Path, instance_id: str) -> None:
        self.root = root / instance_id
        # Counted once per Inbox object, then kept current by deliver/mark_read, so
        # importing N messages costs N, not N × unread.
        self._unread: int | None = None
        self._migrated = False

    def _folder(self, name: str) -> Path:
        if not self._migrated:
            self._migrated = True
            self._migrate_legacy_names()
        return self.root / name

    def _migrate_legacy_names(self) -> None:
        # Earlier versions named files by the bare id; give each its sender machine.
        for folder in (self.root / "new", self.root / "cur"):
            if not folder.is_dir():
                continue
            moved = False
            for path in folder.glob("*.json"):
                if "@" in path.stem:
                    continue
                try:
                    message = msgspec.json.decode(path.read_bytes(), type=InboxMessage)
                    machine = check_name(str(message.sender.get("machine")), "machine")
                except FileNotFoundError:
                    continue  # renamed by a concurrent command
                except (msgspec.DecodeError, InvalidName) as exc:
                    raise StateUnreadable(
                        f"inbox file {path} (written by an earlier version) cannot be read: "
                        f"{exc}; move it out of {folder} to go on"
                    ) from exc
                target = folder / _file_name(machine, message.id)
                try:
                    os.link(path, target)
                except FileExistsError:
                    pass  # a concurrent command renamed it first
                except FileNotFoundError:
                    continue
                path.unlink(missing_ok=True)
                moved = True
            if moved:
                fsync_dir(folder)

    def holds(self, machine: str, msg_id: str) -> bool:
        name = _file_name(machine, msg_id)
        return (self._folder("new") / name).exists() or (self._folder("cur") / name).exists()

    def unread_count(self) -> int:
        if self._unread is None:
            try:
                self._unread = sum(1 for p in self._folder("new").iterdir() if p.suffix == ".json")
            except FileNotFoundError:
                self._unread = 0
        return self._unread

    def deliver(self, message: InboxMessage) -> Delivery:
        """Store `message` durably unless it is already here or the inbox is full."""
        machine, msg_id = message.key
        if self.holds(machine, msg_id):
            return Delivery.DUPLICATE
        if self.unread_count() >= inbox_capacity():
            return Delivery.FULL
        for name in ("tmp", "new", "cur"):
            ensure_dir(self._folder(name))
        tmp = self._folder("tmp") / f"{msg_id}@{machine}.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, msgspec.json.encode(message))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            # link() fails if the name exists: the one place a duplicate id is refused.
            os.link(tmp, self._folder("new") / _file_name(machine, msg_id))
        except FileExistsError:
            return Delivery.DUPLICATE
        finally:
            tmp.unlink()
        fsync_dir(self._folder("new"))
        self._unread = self.unread_count() + 1
        return Delivery.DELIVERED

    def unread(self) -> list[InboxMessage]:
        return self._list("new")

    def read_messages(self) -> list[InboxMessage]:
        return self._list("cur")

    def _list(self, name: str) -> list[InboxMessage]:
        folder = self._folder(name)
        if not folder.is_dir():
            return []
        messages = []
        for path in folder.glob("*.json"):
            try:
                messages.append(msgspec.json.decode(path.read_bytes(), type=InboxMessage))
            except FileNotFoundError:
                continue  # moved to cur/ by a concurrent reader; it is listed there
            except msgspec.DecodeError:
                print(f"agentpost mail: unreadable inbox file {path}", file=sys.stderr)
        return sorted(messages, key=lambda m: (m.sent_at, m.id, m.key))

    def mark_read(self, keys: list[tuple[str, str]]) -> None:
        """Move shown messages, named by (sender machine, id), from new/ to cur/."""
        if not keys:
            return
        for machine, msg_id in keys:
            src = self._folder("new") / _file_name(machine, msg_id)
            if src.exists():
                os.replace(src, self._folder("cur") / src.name)
                if self._unread is not None:
                    self._unread -= 1
        fsync_dir(self._folder("new"))
        fsync_dir(self._folder("cur"))

    def prune_read(self, now: datetime) -> int:
        """Drop read messages past their expiry; dedup no longer needs them then."""
        dropped = 0
        for msg in self.read_messages():
            if parse_ts(msg.expires_at) <= now:
                (self._folder("cur") / _file_name(*msg.key)).unlink(missing_ok=True)
                dropped += 1
        return dropped
