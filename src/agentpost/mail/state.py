"""What the log means now: sessions, outbox, acks, dedup set and pinned keys.

Nothing here is stored; every value is derived from the log records and the clock,
so a crash between the log and a push is repaired by the next sync (DESIGN.md §7).
`needed_records` is the compaction rule: the lines the derivation still depends on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from agentpost.mail.clock import parse_ts
from agentpost.mail.envelope import RawEnvelope
from agentpost.mail.log import Acked, Expired, Imported, Join, Pinned, Record, Retired, Sent


@dataclass
class MailState:
    instances: dict[str, Join] = field(default_factory=dict)
    sent: dict[str, Sent] = field(default_factory=dict)
    acked: dict[str, Acked] = field(default_factory=dict)
    expired: dict[str, Expired] = field(default_factory=dict)
    imported: dict[str, Imported] = field(default_factory=dict)
    retired: dict[str, Retired] = field(default_factory=dict)
    pins: dict[str, Pinned] = field(default_factory=dict)

    @classmethod
    def from_records(cls, records: list[Record]) -> MailState:
        state = cls()
        for rec in records:
            state.apply(rec)
        return state

    def apply(self, rec: Record) -> None:
        """Fold one record in; later records win (a re-join, a re-pin by `mail trust`)."""
        if isinstance(rec, Join):
            self.instances[rec.instance_id] = rec
        elif isinstance(rec, Sent):
            self.sent[str(rec.envelope["id"])] = rec
        elif isinstance(rec, Acked):
            self.acked[rec.id] = rec
        elif isinstance(rec, Expired):
            self.expired[rec.id] = rec
        elif isinstance(rec, Imported):
            # A later import of the same id is a re-ack: the sender offered it again
            # after we retired the ack, so we acknowledge it again.
            self.imported[rec.id] = rec
            self.retired.pop(rec.id, None)
        elif isinstance(rec, Retired):
            self.retired[rec.id] = rec
        elif isinstance(rec, Pinned):
            self.pins[rec.machine] = rec

    def instance_by_name(self, name: str) -> Join | None:
        # A name is one session per machine: join reuses it, so at most one matches.
        for inst in self.instances.values():
            if inst.name == name:
                return inst
        return None

    def pending(self, now: datetime) -> list[RawEnvelope]:
        """The outbox: our remote sends not acknowledged and not expired, oldest first."""
        return [
            rec.envelope
            for msg_id, rec in self.sent.items()
            if not rec.local
            and msg_id not in self.acked
            and msg_id not in self.expired
            and parse_ts(str(rec.envelope["expires_at"])) > now
        ]

    def local_sends(self, now: datetime) -> list[RawEnvelope]:
        """Notes to sessions on this machine that have not expired (for crash repair)."""
        return [
            rec.envelope
            for rec in self.sent.values()
            if rec.local and parse_ts(str(rec.envelope["expires_at"])) > now
        ]

    def newly_expired(self, now: datetime) -> list[RawEnvelope]:
        """Sends that ran out of time unacknowledged and were not yet reported."""
        return [
            rec.envelope
            for msg_id, rec in self.sent.items()
            if not rec.local
            and msg_id not in self.acked
            and msg_id not in self.expired
            and parse_ts(str(rec.envelope["expires_at"])) <= now
        ]

    def acks(self, now: datetime) -> list[str]:
        """Ids we imported and still acknowledge, sorted for a stable ref document."""
        return sorted(
            msg_id
            for msg_id, rec in self.imported.items()
            if msg_id not in self.retired and parse_ts(rec.expires_at) > now
        )

    def seen(self, msg_id: str, now: datetime) -> bool:
        """Dedup: an id imported here is refused again until it could no longer be offered."""
        rec = self.imported.get(msg_id)
        return rec is not None and parse_ts(rec.expires_at) > now

    def needed_records(self, now: datetime) -> list[Record]:
        """Compaction keeps: the sessions, the pins, the outbox, and imports still in force."""
        keep: list[Record] = [*self.instances.values(), *self.pins.values()]
        pending = {str(env["id"]) for env in self.pending(now)}
        keep.extend(rec for msg_id, rec in self.sent.items() if msg_id in pending)
        for msg_id, imp in self.imported.items():
            # Dedup needs the id until the envelope expires, even after the ack retired.
            if parse_ts(imp.expires_at) > now:
                keep.append(imp)
                if msg_id in self.retired:
                    keep.append(self.retired[msg_id])
        return keep
