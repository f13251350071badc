"""`mail sync`: fetch, pin keys, import, take acks, retire acks, expire, publish.

One pass under the clone's lock (docs/mail.md). Facts are appended to the log in
one fsync before the refs are published, so whatever a crash interrupts, the next
sync derives the same outbox and acks and finishes the job.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime

from agentpost.mail import clock
from agentpost.mail.clock import format_ts, parse_ts
from agentpost.mail.commands import redeliver_local
from agentpost.mail.context import MailContext
from agentpost.mail.importer import (
    ACCEPT,
    DUPLICATE_ID,
    INBOX_FULL,
    REFUSE,
    SKIP,
    Verdict,
    judge,
    repeated_ids,
)
from agentpost.mail.inbox import Delivery, Inbox, InboxMessage
from agentpost.mail.limits import COMPACT_SLACK_LINES, LOCK_WAIT_SECONDS, REPUBLISH_EVERY
from agentpost.mail.lock import mail_lock
from agentpost.mail.log import Acked, Expired, Imported, Pinned, Record, Retired
from agentpost.mail.marks import load_marks, save_marks, stamp
from agentpost.mail.publish import publish
from agentpost.mail.state import MailState
from agentpost.mail.view import RemoteView, read_view
from agentpost.mail.wire import DocumentError, MailDoc, ack_entry


@dataclass
class SyncReport:
    imported: int = 0
    acked: int = 0
    published: bool = False
    refused: list[dict[str, str | None]] = field(default_factory=list)
    # Machines whose presence shows a key other than the pinned one; not part of the JSON of
    # docs/mail.md "Commands", surfaced by the hooks so the agent's user sees it, not only stderr.
    key_changed: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "imported": self.imported,
            "acked": self.acked,
            "published": self.published,
            "refused": self.refused,
        }


def sync(
    ctx: MailContext, *, wait_seconds: float = LOCK_WAIT_SECONDS, hook: bool = False
) -> SyncReport:
    """One full sync; raises MailBusy if another holds the lock past `wait_seconds`."""
    with mail_lock(ctx.paths.lock, wait_seconds):
        now = clock.now()
        try:
            return _sync_locked(ctx, now)
        finally:
            if hook:
                # Stamped even when the remote is unreachable, so a dead remote costs a
                # hook at most one timeout per 30 s, not one per prompt.
                marks = load_marks(ctx.paths.state)
                marks.hook_sync_at = stamp(now)
                save_marks(ctx.paths.state, marks)


def _sync_locked(ctx: MailContext, now: datetime) -> SyncReport:
    ctx.git.fetch(ctx.remote)
    view = read_view(ctx.git, ctx.remote)
    read = ctx.log.read()
    state = MailState.from_records(read.records)
    report = SyncReport()
    records: list[Record] = []
    changed_keys = _pin_keys(ctx, state, view, now, records)
    report.key_changed = sorted(changed_keys)
    _import(ctx, state, view, changed_keys, now, records, report)
    trusted = _trusted_mail_docs(ctx, state, view, changed_keys, report)
    _take_acks(state, trusted, now, records, report)
    _retire_acks(state, trusted, now, records)
    _expire(state, now, records)
    redeliver_local(ctx, state, now)
    ctx.log.append(records)
    for rec in records:
        state.apply(rec)
    marks = load_marks(ctx.paths.state)
    since = marks.since_publish(now)
    overdue = since is None or since >= REPUBLISH_EVERY.total_seconds()
    report.published = publish(ctx, state, view, now, force_mail=overdue).published
    _compact_if_bloated(ctx, state, read.lines + len(records), now)
    for item in report.refused:
        print(
            f"agentpost mail: refused {item['id'] or 'ref'} from {item['machine']}: {item['reason']}",
            file=sys.stderr,
        )
    return report


def _pin_keys(
    ctx: MailContext, state: MailState, view: RemoteView, now: datetime, records: list[Record]
) -> set[str]:
    """Pin keys seen for the first time; return machines whose key changed since pinning."""
    changed: set[str] = set()
    own = ctx.own_names()
    for machine, doc in view.valid_presence().items():
        if machine in own and machine != ctx.machine and doc.public_key == ctx.key().public_b64:
            continue  # our own name before a rename, not yet deleted from the remote
        if machine == ctx.machine:
            if doc.public_key != ctx.key().public_b64:
                print(
                    f"agentpost mail: WARNING the remote's presence for {machine} carries another "
                    "key: another clone publishes under this machine name; set AGENTPOST_MACHINE",
                    file=sys.stderr,
                )
            continue
        pin = state.pins.get(machine)
        if pin is None:
            rec = Pinned(machine, doc.public_key, format_ts(now))
            records.append(rec)
            state.apply(rec)
        elif pin.public_key != doc.public_key:
            changed.add(machine)
            print(
                f"agentpost mail: WARNING machine {machine} now presents a different public key "
                f"than the one pinned on {pin.at}; its mail is refused. If the change is "
                f"expected, run `agentpost mail trust {machine}`.",
                file=sys.stderr,
            )
    return changed


def _import(
    ctx: MailContext,
    state: MailState,
    view: RemoteView,
    changed_keys: set[str],
    now: datetime,
    records: list[Record],
    report: SyncReport,
) -> None:
    inboxes: dict[str, Inbox] = {}
    own = ctx.own_names()
    for machine, doc in sorted(view.mail.items()):
        if machine in own:
            continue
        if isinstance(doc, DocumentError):
            report.refused.append({"id": None, "machine": machine, "reason": doc.reason})
            continue
        repeated = repeated_ids(doc.outbox)
        for pos, raw in enumerate(doc.outbox):
            verdict = judge(raw, machine, ctx.machine, state, changed_keys, now, own)
            if pos in repeated and not (verdict.action == SKIP and verdict.envelope is None):
                verdict = Verdict(REFUSE, DUPLICATE_ID)  # addressed here, offered twice
            env = verdict.envelope
            if verdict.action == REFUSE:
                msg_id = raw.get("id") if isinstance(raw, dict) else None
                report.refused.append(
                    {
                        "id": msg_id if isinstance(msg_id, str) else None,
                        "machine": machine,
                        "reason": verdict.reason,
                    }
                )
                continue
            if verdict.action == SKIP and env is not None and (machine, env.id) in state.retired:
                # Offered again after we retired its ack (a replaced or forged sender
                # ref): acknowledge it again, or the sender offers it until expiry.
                prior = state.imported[(machine, env.id)]
                rec = Imported(
                    env.id,
                    prior.sender,
                    prior.instance_id,
                    prior.expires_at,
                    doc.updated_at,
                    format_ts(now),
                )
                records.append(rec)
                state.apply(rec)
                continue
            if verdict.action != ACCEPT or env is None or verdict.recipient is None:
                continue
            message = InboxMessage.from_envelope(raw, format_ts(now))
            inbox = inboxes.setdefault(
                verdict.recipient.instance_id, ctx.inbox(verdict.recipient.instance_id)
            )
            outcome = inbox.deliver(message)
            if outcome is Delivery.FULL:
                # Left unacked: the sender keeps offering it until there is room.
                report.refused.append({"id": env.id, "machine": machine, "reason": INBOX_FULL})
                continue
            # DUPLICATE without a log record means a crash came between inbox and log.
            rec = Imported(
                env.id,
                raw["from"],
                verdict.recipient.instance_id,
                env.expires_at,
                doc.updated_at,
                format_ts(now),
            )
            records.append(rec)
            state.apply(rec)
            if outcome is Delivery.DELIVERED:
                report.imported += 1
            for other in state.other_senders_of(machine, env.id, now):
                # Harmless now that notes are keyed by machine, but worth a look: ids are
                # random, so a reused one was copied on purpose.
                print(
                    f"agentpost mail: WARNING id {env.id} from {machine} is also the id of a "
                    f"note from {other}; both are kept, each under its own machine",
                    file=sys.stderr,
                )


def _trusted_mail_docs(
    ctx: MailContext,
    state: MailState,
    view: RemoteView,
    changed_keys: set[str],
    report: SyncReport,
) -> dict[str, MailDoc]:
    """Peers' mail documents signed by their pinned key: the only ones whose acks count.

    Envelopes carry their own signatures; acks do not, so a document signature is what
    stops a forged ref from making us drop a message nobody received (docs/mail.md).
    """
    trusted: dict[str, MailDoc] = {}
    own = ctx.own_names()
    for machine, doc in view.mail.items():
        pin = state.pins.get(machine)
        if machine in own or not isinstance(doc, MailDoc) or pin is None:
            continue
        if machine in changed_keys:
            continue  # already refused loudly, envelope by envelope
        if view.mail_signed_by(machine, pin.public_key):
            trusted[machine] = doc
        else:
            stored = view.mail_stored.get(machine)
            reason = "missing_signature" if stored and stored.signature is None else "bad_signature"
            report.refused.append({"id": None, "machine": machine, "reason": reason})
    return trusted


def _take_acks(
    state: MailState,
    trusted: dict[str, MailDoc],
    now: datetime,
    records: list[Record],
    report: SyncReport,
) -> None:
    """Drop our messages that their recipient machine lists in its acks."""
    acks_of: dict[str, set[str]] = {}
    for envelope in state.pending(now):
        to_machine = envelope["to"]["machine"]
        if to_machine not in acks_of:
            # Only the recipient machine's own signed ref can acknowledge a message to it
            # (or, after a rename, the ref signed by the same pinned key).
            docs = [trusted.get(to_machine), _renamed_to(to_machine, state, trusted)]
            acks_of[to_machine] = {a for doc in docs if doc is not None for a in doc.acks}
        # Only under our machine's name: an ack of another machine's note with the same
        # id is not ours (docs/mail.md).
        entry = ack_entry(str(envelope["from"]["machine"]), str(envelope["id"]))
        if entry in acks_of[to_machine]:
            records.append(Acked(envelope["id"], to_machine, format_ts(now)))
            report.acked += 1


def _renamed_to(machine: str, state: MailState, trusted: dict[str, MailDoc]) -> MailDoc | None:
    """The signed ref of the machine `machine` became by `mail rename-machine`, if any.

    A rename keeps the machine key, so the ref signed by the key pinned for `machine`
    speaks for it: its acks of our notes to `machine` count, and nothing else can sign it.
    """
    pin = state.pins.get(machine)
    if pin is None:
        return None
    for other, doc in trusted.items():
        other_pin = state.pins.get(other)
        if other != machine and other_pin is not None and other_pin.public_key == pin.public_key:
            return doc
    return None


def _retire_acks(
    state: MailState, trusted: dict[str, MailDoc], now: datetime, records: list[Record]
) -> None:
    """Stop acknowledging once the sender's newer ref no longer offers the message."""
    offered: dict[str, set[object]] = {}
    for sender, msg_id in state.acks(now):
        imp = state.imported[(sender, msg_id)]
        doc = trusted.get(sender) or _renamed_to(sender, state, trusted)
        if doc is None:
            continue
        try:
            newer = parse_ts(doc.updated_at) > parse_ts(imp.ref_updated_at)
        except ValueError:
            continue
        if sender not in offered:
            offered[sender] = {e.get("id") for e in doc.outbox if isinstance(e, dict)}
        if newer and msg_id not in offered[sender]:
            records.append(Retired(msg_id, format_ts(now), sender))


def _expire(state: MailState, now: datetime, records: list[Record]) -> None:
    """Say plainly, once, that a message expired without its recipient acknowledging it."""
    for envelope in state.newly_expired(now):
        to = envelope["to"]
        print(
            f"agentpost mail: message {envelope['id']} to {to.get('name')}@{to.get('machine')} "
            "expired after 14 days without an acknowledgement; it may not have been read",
            file=sys.stderr,
        )
        records.append(Expired(envelope["id"], format_ts(now)))


def _compact_if_bloated(ctx: MailContext, state: MailState, lines: int, now: datetime) -> None:
    # Keeps a sync's cost tied to what is pending, not to everything ever sent.
    needed = state.needed_records(now)
    if lines - len(needed) > COMPACT_SLACK_LINES:
        ctx.log.replace(needed)
        for inst in state.instances.values():
            ctx.inbox(inst.instance_id).prune_read(now)
