"""What the log means now: sessions, outbox, acks, dedup set and pinned keys.

Nothing here is stored; every value is derived from the log records and the clock,
so a crash between the log and a push is repaired by the next sync (docs/mail.md).
`needed_records` is the compaction rule: the lines the derivation still depends on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import msgspec

from agentpost.mail.clock import parse_ts
from agentpost.mail.envelope import RawEnvelope
from agentpost.mail.limits import MESSAGE_TTL
from agentpost.mail.log import (
    Acked,
    Expired,
    Forgotten,
    Imported,
    Join,
    Pinned,
    Record,
    Retired,
    SendKey,
    Sent,
)

# An imported message is named by (sender machine, envelope id): ids are chosen by their
# sender, so only the pair is unique across machines (docs/mail.md).
MessageKey = tuple[str, str]


@dataclass
class MailState:
    instances: dict[str, Join] = field(default_factory=dict)
    sent: dict[str, Sent] = field(default_factory=dict)
    acked: dict[str, Acked] = field(default_factory=dict)
    expired: dict[str, Expired] = field(default_factory=dict)
    imported: dict[MessageKey, Imported] = field(default_factory=dict)
    retired: dict[MessageKey, Retired] = field(default_factory=dict)
    pins: dict[str, Pinned] = field(default_factory=dict)
    # `mail send --idempotency-key`: (sending instance, key) → what that send was.
    send_keys: dict[tuple[str, str], SendKey] = field(default_factory=dict)
    forgotten: dict[str, Forgotten] = field(default_factory=dict)

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
            if rec.key is not None and rec.fingerprint is not None:
                keyed = _send_key(rec, rec.key, rec.fingerprint)
                self.send_keys[(keyed.instance_id, keyed.key)] = keyed
        elif isinstance(rec, SendKey):
            self.send_keys[(rec.instance_id, rec.key)] = rec
        elif isinstance(rec, Forgotten):
            self.forgotten[rec.machine] = rec
            if rec.unpinned:
                self.pins.pop(rec.machine, None)
        elif isinstance(rec, Acked):
            self.acked[rec.id] = rec
        elif isinstance(rec, Expired):
            self.expired[rec.id] = rec
        elif isinstance(rec, Imported):
            # A later import of the same key is a re-ack: the sender offered it again
            # after we retired the ack, so we acknowledge it again.
            key = (rec.machine, rec.id)
            self.imported[key] = rec
            self.retired.pop(key, None)
        elif isinstance(rec, Retired):
            for key in self._retired_keys(rec):
                self.retired[key] = Retired(rec.id, rec.at, key[0])
        elif isinstance(rec, Pinned):
            self.pins[rec.machine] = rec

    def _retired_keys(self, rec: Retired) -> list[MessageKey]:
        if rec.machine is not None:
            return [(rec.machine, rec.id)]
        # A line from before keyed acks: that version held at most one import per id.
        return [key for key in self.imported if key[1] == rec.id]

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

    def acks(self, now: datetime) -> list[MessageKey]:
        """Messages we imported and still acknowledge, sorted for a stable ref document."""
        return sorted(
            key
            for key, rec in self.imported.items()
            if key not in self.retired and parse_ts(rec.expires_at) > now
        )

    def seen(self, machine: str, msg_id: str, now: datetime) -> bool:
        """Dedup: a message imported here is skipped again until it could no longer be offered."""
        rec = self.imported.get((machine, msg_id))
        return rec is not None and parse_ts(rec.expires_at) > now

    def other_senders_of(self, machine: str, msg_id: str, now: datetime) -> list[str]:
        """Other machines whose note with this id is held here (an id reused elsewhere)."""
        return sorted(
            m
            for (m, i), rec in self.imported.items()
            if i == msg_id and m != machine and parse_ts(rec.expires_at) > now
        )

    def send_key(self, instance_id: str, key: str, now: datetime) -> SendKey | None:
        """The send this session already made under `key`, while the key is in force."""
        rec = self.send_keys.get((instance_id, key))
        if rec is None or parse_ts(rec.sent_at) + MESSAGE_TTL <= now:
            return None
        return rec

    def send_outcome(self, keyed: SendKey) -> str:
        """"acked" or "expired" once a keyed note left the outbox, else ""."""
        if keyed.outcome or keyed.local:
            return keyed.outcome
        if keyed.id in self.acked:
            return "acked"
        return "expired" if keyed.id in self.expired else ""

    def needed_records(self, now: datetime) -> list[Record]:
        """Compaction keeps: sessions, pins, the outbox, imports and send keys in force."""
        # Forgotten before pins: an unpinning must not undo a pin taken after it.
        keep: list[Record] = [*self.forgotten.values()]
        keep.extend([*self.instances.values(), *self.pins.values()])
        pending = {str(env["id"]) for env in self.pending(now)}
        keep.extend(rec for msg_id, rec in self.sent.items() if msg_id in pending)
        for (instance_id, send_key), keyed in self.send_keys.items():
            # A keyed send that left the outbox keeps only its key, for as long as a
            # retry of it could still come (the note's own lifetime).
            if keyed.id not in pending and self.send_key(instance_id, send_key, now) is not None:
                outcome = self.send_outcome(keyed)
                keep.append(msgspec.structs.replace(keyed, outcome=outcome))
        for msg_key, imp in self.imported.items():
            # Dedup needs the key until the envelope expires, even after the ack retired.
            if parse_ts(imp.expires_at) > now:
                keep.append(imp)
                if msg_key in self.retired:
                    keep.append(self.retired[msg_key])
        return keep


def _send_key(rec: Sent, key: str, fingerprint: str) -> SendKey:
    env = rec.envelope
    return SendKey(
        instance_id=str(env["from"]["instance_id"]),
        key=key,
        fingerprint=fingerprint,
        id=str(env["id"]),
        to=dict(env["to"]),
        local=rec.local,
        sent_at=str(env["sent_at"]),
    )
