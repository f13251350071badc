"""The append-only mail log, `.git/agentpost/log.jsonl` (docs/mail.md).

Every fact (a join, a send, an import, an ack seen, a key pinned) is one JSON line,
appended and fsync'd before anyone acts on it; a line is never rewritten. Reading
tolerates only a last line torn by a crash (the next append cuts it off); any other
unreadable line fails closed until `agentpost mail repair` sets it aside, because
skipping it could silently drop a sent note. Compaction writes a new file of the
lines still needed and atomically replaces the old one.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from agentpost.mail.errors import StateUnreadable, StorageFailed
from agentpost.mail.fsio import atomic_write, ensure_dir, fsync_dir


class Join(msgspec.Struct, tag="join", tag_field="t", frozen=True):
    """A session instance registered (or re-registered) on this machine."""

    instance_id: str
    name: str
    at: str


class Sent(msgspec.Struct, tag="sent", tag_field="t", frozen=True):
    """An envelope this machine signed; `local` ones went straight to a local inbox.

    `key` and `fingerprint` are set for `mail send --idempotency-key`: they ride in the
    same line as the envelope, so a crash can never keep one without the other.
    """

    envelope: dict[str, Any]
    local: bool = False
    key: str | None = None
    fingerprint: str | None = None


class SendKey(msgspec.Struct, tag="send_key", tag_field="t", frozen=True):
    """What compaction keeps of a keyed send once its envelope is no longer needed."""

    instance_id: str
    key: str
    fingerprint: str
    id: str
    to: dict[str, Any]
    local: bool
    sent_at: str
    # How the note left the outbox, "acked" or "expired" ("" while it is still offered).
    outcome: str = ""


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
    """An envelope accepted into a local inbox; (its machine, id) is in our acks until retired."""

    id: str
    sender: dict[str, Any]
    instance_id: str
    expires_at: str
    ref_updated_at: str
    at: str

    @property
    def machine(self) -> str:
        """The sender machine: with the id, the key of dedup, inbox and acks (docs/mail.md)."""
        return str(self.sender.get("machine"))


class Retired(msgspec.Struct, tag="retired", tag_field="t", frozen=True):
    """The sender's newer ref no longer lists the message: stop acking it.

    `machine` is None only in lines written before acks were keyed by machine; such a
    line retires the one import of that id the old version could hold.
    """

    id: str
    at: str
    machine: str | None = None


class Pinned(msgspec.Struct, tag="pinned", tag_field="t", frozen=True):
    """A peer machine's public key, trusted on first sight or by `mail trust`."""

    machine: str
    public_key: str
    at: str


class Forgotten(msgspec.Struct, tag="forgotten", tag_field="t", frozen=True):
    """`mail forget MACHINE`: addressing stops offering it; `unpinned` dropped its key too."""

    machine: str
    at: str
    unpinned: bool = False


Record = Join | Sent | Acked | Expired | Imported | Retired | Pinned | SendKey | Forgotten

REPAIR_HINT = "run `agentpost mail repair` to set unreadable lines aside"

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
                data = _after_torn_tail(fd) + data
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
        """Every record in order; only a torn last line is skipped (and counted).

        Any other unreadable line raises StateUnreadable: acting on a log with a hole
        could drop a sent note or import one twice (docs/mail.md, fail closed).
        """
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return LogRead([], 0, 0)
        except OSError as exc:
            raise StateUnreadable(f"cannot read {self.path}: {exc}") from exc
        records: list[Record] = []
        skipped = 0
        lines = 0
        torn_tail = not data.endswith(b"\n")
        numbered = [(n, line) for n, line in enumerate(data.split(b"\n"), 1) if line.strip()]
        for pos, (number, line) in enumerate(numbered):
            lines += 1
            try:
                records.append(_decoder.decode(line))
            except msgspec.DecodeError as exc:
                if torn_tail and pos == len(numbered) - 1:
                    skipped += 1  # a write cut by a crash: never acted on
                    continue
                raise StateUnreadable(
                    f"line {number} of {self.path} cannot be read ({exc}); mail refuses to "
                    f"act on a log with a hole in it: {REPAIR_HINT}",
                    extra={"line": number},
                ) from exc
        if skipped:
            print(
                f"agentpost mail: skipped {skipped} unreadable line(s) in {self.path} "
                "(the last one, cut short by a crash)",
                file=sys.stderr,
            )
        return LogRead(records, lines, skipped)

    def split_readable(self) -> tuple[list[bytes], list[tuple[int, bytes]]]:
        """For repair: the readable lines as they are, and the others with their numbers."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return [], []
        good: list[bytes] = []
        bad: list[tuple[int, bytes]] = []
        for number, line in enumerate(data.split(b"\n"), 1):
            if not line.strip():
                continue
            try:
                _decoder.decode(line)
            except msgspec.DecodeError:
                bad.append((number, line))
            else:
                good.append(line)
        return good, bad

    def replace_lines(self, lines: list[bytes]) -> None:
        """Repair: atomically swap in exactly these (already readable) lines."""
        atomic_write(self.path, b"".join(line + b"\n" for line in lines))

    def replace(self, records: list[Record]) -> None:
        """Compaction: atomically swap in a log holding exactly `records`."""
        data = b"".join(_encoder.encode(r) + b"\n" for r in records)
        atomic_write(self.path, data)


def _after_torn_tail(fd: int) -> bytes:
    """Make the file end on a line boundary before an append; return a prefix if needed.

    A last line without its newline was cut by a crash during its write, so no one
    acted on it: an unreadable fragment is cut off (otherwise it would become a hole in
    the middle of the log); a fragment that still reads as a record is kept and ended.
    """
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return b""
    data = os.pread(fd, size, 0)
    start = data.rfind(b"\n") + 1
    try:
        _decoder.decode(data[start:])
    except msgspec.DecodeError:
        os.ftruncate(fd, start)
        os.fsync(fd)
        return b""
    return b"\n"
