"""The append-only mail log, `.git/agentpost/log.jsonl` (DESIGN.md §7).

Every fact (a join, a send, an import, an ack seen, a key pinned) is one JSON line,
appended and fsync'd before anyone acts on it; a line is never rewritten. Reading
tolerates a line torn by a crash. Compaction writes a new file of the lines still
needed and atomically replaces the old one.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from agentpost.mail.errors import StorageFailed
from agentpost.mail.fsio import atomic_write, ensure_dir, fsync_dir


class Join(msgspec.Struct, tag="join", tag_field="t", frozen=True):
    """A session instance registered (or re-registered) on this machine."""

    instance_id: str
    name: str
    at: str


class Sent(msgspec.Struct, tag="sent", tag_field="t", frozen=True):
    """An envelope this machine signed; `local` ones went straight to a local inbox."""

    envelope: dict[str, Any]
    local: bool = False


class Acked(msgspec.Struct, tag="acked", tag_field="t", frozen=True):
    """The recipient machine listed our message in its acks: drop it from the outbox."""

    id: str
    by: str
    at: str


class Expired(msgspec.Struct, tag="expired", tag_field="t", frozen=True):
    """Our message reached expires_at unacknowledged; recorded so it is reported once."""

    id: str
    at: str


class Imported(msgspec.Struct, tag="imported", tag_field="t", frozen=True):
    """An envelope accepted into a local inbox; its id is in our acks until retired."""

    id: str
    sender: dict[str, Any]
    instance_id: str
    expires_at: str
    ref_updated_at: str
    at: str


class Retired(msgspec.Struct, tag="retired", tag_field="t", frozen=True):
    """The sender's newer ref no longer lists the message: stop acking it."""

    id: str
    at: str


class Pinned(msgspec.Struct, tag="pinned", tag_field="t", frozen=True):
    """A peer machine's public key, trusted on first sight or by `mail trust`."""

    machine: str
    public_key: str
    at: str


Record = Join | Sent | Acked | Expired | Imported | Retired | Pinned

_decoder = msgspec.json.Decoder(Record)
_encoder = msgspec.json.Encoder()


@dataclass(frozen=True)
class LogRead:
    records: list[Record]
    lines: int
    skipped: int


class MailLog:
    """One machine's mail log file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def exists(self) -> bool:
        return self.path.exists()

    def append(self, records: list[Record]) -> None:
        """Append `records` in one write and fsync; returns only once they are durable."""
        if not records:
            return
        data = b"".join(_encoder.encode(r) + b"\n" for r in records)
        try:
            ensure_dir(self.path.parent)
            created = not self.path.exists()
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                if _ends_torn(fd):
                    # A crash tore the last line; start ours on a fresh line so both read.
                    data = b"\n" + data
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            if created:
                fsync_dir(self.path.parent)
        except OSError as exc:
            # Not durable means not done: the caller acts on nothing it failed to log.
            raise StorageFailed(f"cannot append to {self.path}: {exc}") from exc

    def read(self) -> LogRead:
        """Every readable record in order; torn or unknown lines are skipped and counted."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return LogRead([], 0, 0)
        records: list[Record] = []
        skipped = 0
        lines = 0
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            lines += 1
            try:
                records.append(_decoder.decode(line))
            except msgspec.DecodeError:
                skipped += 1
        if skipped:
            print(
                f"agentpost mail: skipped {skipped} unreadable line(s) in {self.path}",
                file=sys.stderr,
            )
        return LogRead(records, lines, skipped)

    def replace(self, records: list[Record]) -> None:
        """Compaction: atomically swap in a log holding exactly `records`."""
        data = b"".join(_encoder.encode(r) + b"\n" for r in records)
        atomic_write(self.path, data)


def _ends_torn(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"
