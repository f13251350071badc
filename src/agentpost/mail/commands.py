"""The operations behind `agentpost mail join|send|inbox|outbox|compact|trust` (docs/mail.md).

Each takes the clone's lock for anything it writes, appends to the log before it
acts, and returns a plain result the CLI prints. Sync and the hooks live in
`sync.py` and `hooks.py`.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from datetime import datetime

import msgspec

from agentpost.core.ids import new_id
from agentpost.core.jcs import canonical
from agentpost.core.thread_key import InvalidKey, check_key
from agentpost.mail import clock
from agentpost.mail.address import parse_recipient, renamed_machines, resolve
from agentpost.mail.clock import format_ts
from agentpost.mail.context import MailContext
from agentpost.mail.envelope import Address, RawEnvelope, new_envelope, sign
from agentpost.mail.errors import (
    IdempotencyConflict,
    InboxFull,
    InvalidBody,
    InvalidIdempotencyKey,
    MachineRenamed,
    MailError,
    OutboxFull,
    UnknownMachine,
    UnknownRecipient,
)
from agentpost.mail.inbox import Delivery, InboxMessage
from agentpost.mail.limits import LOCK_WAIT_SECONDS, MAX_BODY_BYTES, MAX_REF_BYTES, inbox_capacity
from agentpost.mail.lock import mail_lock
from agentpost.mail.log import Join, Pinned, SendKey, Sent
from agentpost.mail.publish import mail_doc, publish
from agentpost.mail.repo import check_name
from agentpost.mail.state import MailState
from agentpost.mail.view import RemoteView, read_view
from agentpost.mail.wire import MailDoc, encode


@dataclass(frozen=True)
class JoinResult:
    instance_id: str
    name: str
    machine: str

    def to_json(self) -> dict[str, object]:
        return {"instance_id": self.instance_id, "name": self.name, "machine": self.machine}


SENT = "sent"
REPLAYED = "replayed"


@dataclass(frozen=True)
class SendResult:
    id: str
    to: Address
    published: bool
    local: bool = False
    # "replayed": this session sent a note under the same idempotency key before.
    delivery: str = SENT

    def to_json(self) -> dict[str, object]:
        to: dict[str, object] = {"machine": self.to.machine, "name": self.to.name}
        if self.to.instance_id is not None:
            to["instance_id"] = self.to.instance_id
        return {"id": self.id, "to": to, "published": self.published, "delivery": self.delivery}


def join(ctx: MailContext, name: str) -> JoinResult:
    """Register a session on this machine (the same name keeps its instance) and publish presence."""
    check_name(name, "session")
    # Presence may go out later (an offline remote is fine), but a clone with no remote
    # could never publish it: refuse before anything is written.
    ctx.remote  # noqa: B018 - resolving is the check
    with mail_lock(ctx.paths.lock, LOCK_WAIT_SECONDS):
        now = clock.now()
        state = ctx.load_state()
        existing = state.instance_by_name(name)
        instance_id = existing.instance_id if existing else new_id("in")
        rec = Join(instance_id, name, format_ts(now))
        ctx.log.append([rec])
        state.apply(rec)
        ctx.key()
        try:
            publish(ctx, state, _known_view(ctx), now)
        except MailError as exc:
            # Joining is local; presence goes out with the next sync.
            print(f"agentpost mail: presence not published yet: {exc.message}", file=sys.stderr)
        return JoinResult(rec.instance_id, rec.name, ctx.machine)


def send(
    ctx: MailContext,
    to_name: str,
    instance_id: str | None,
    body: str,
    idempotency_key: str | None = None,
) -> SendResult:
    """Sign, log (fsync) and deliver: straight into a local inbox, or publish and push.

    With `idempotency_key`, a second send under the same key from the same session is
    answered from the log ("replayed") and sends nothing, even when the first one was
    killed before it could print its answer.
    """
    if not body.strip():
        raise InvalidBody("the message body is empty")
    if len(body.encode("utf-8")) > MAX_BODY_BYTES:
        raise InvalidBody(f"the message body exceeds {MAX_BODY_BYTES} bytes")
    fingerprint = None
    if idempotency_key is not None:
        try:
            check_key(idempotency_key)
        except InvalidKey as exc:
            raise InvalidIdempotencyKey(str(exc)) from exc
        fingerprint = send_fingerprint(to_name, instance_id, body)
    with mail_lock(ctx.paths.lock, LOCK_WAIT_SECONDS):
        now = clock.now()
        state = ctx.load_state()
        sender = ctx.acting_instance(state)
        view = _known_view(ctx)
        if idempotency_key is not None and fingerprint is not None:
            prior = state.send_key(sender.instance_id, idempotency_key, now)
            if prior is not None:
                return _replay(ctx, state, view, now, prior, fingerprint)
        name, on = parse_recipient(to_name)
        target = resolve(name, instance_id, ctx.machine, state, view, on)
        if target is None and on != ctx.machine:
            # Not known here yet: fetch presence once, then decide (docs/mail.md).
            ctx.git.fetch(ctx.remote)
            view = read_view(ctx.git, ctx.remote)
            target = resolve(name, instance_id, ctx.machine, state, view, on)
        if target is None and on is not None and on in (moved := renamed_machines(state, view)):
            # Not an alias: a renamed machine is addressed by its new name only (docs/mail.md).
            raise MachineRenamed(
                f"machine {on} was renamed to {moved[on]} (it presents the key pinned for "
                f"{on}); send to {name}@{moved[on]}. Nothing was sent",
                extra={"renamed_to": moved[on]},
            )
        if target is None:
            who = f"{to_name} (instance {instance_id})" if instance_id else to_name
            raise UnknownRecipient(f"no session named {who} here, in presence, or among senders")
        me = Address(ctx.machine, sender.name, sender.instance_id)
        raw = sign(new_envelope(me, target.address, body, now), ctx.key())
        if target.local_instance is not None:
            local = Sent(raw, local=True, key=idempotency_key, fingerprint=fingerprint)
            return _send_local(ctx, local, target.address, target.local_instance)
        planned = mail_doc(ctx, state, now)
        pending = [*planned.outbox, raw]
        size = len(encode(MailDoc(ctx.machine, planned.updated_at, pending, planned.acks)))
        if size > MAX_REF_BYTES:
            raise OutboxFull(
                f"{len(pending) - 1} unacknowledged messages fill the mail ref; wait for acks"
            )
        rec = Sent(raw, key=idempotency_key, fingerprint=fingerprint)
        ctx.log.append([rec])
        state.apply(rec)
        try:
            published = publish(ctx, state, view, now).published
        except MailError as exc:
            # The note is in the log, so it is sent: queued, never an error that would
            # invite the caller to send it a second time (docs/mail.md).
            print(f"agentpost mail: queued, not yet published: {exc.message}", file=sys.stderr)
            published = False
        return SendResult(raw["id"], target.address, published)


def send_fingerprint(to_name: str, instance_id: str | None, body: str) -> str:
    """What one keyed send asked for: the recipient as given and the body."""
    asked = {"to": to_name, "instance_id": instance_id, "body": body}
    return hashlib.sha256(canonical(asked)).hexdigest()


def _replay(
    ctx: MailContext,
    state: MailState,
    view: RemoteView,
    now: datetime,
    prior: SendKey,
    fingerprint: str,
) -> SendResult:
    if prior.fingerprint != fingerprint:
        raise IdempotencyConflict(
            f"this session already sent note {prior.id} under this idempotency key, with "
            "another recipient or body; nothing was sent (use a new key for a new note)",
            extra={"id": prior.id},
        )
    to = msgspec.convert(prior.to, Address)
    if prior.local:
        # Logged before the inbox write; a crash in between is finished here.
        redeliver_local(ctx, state, now)
        return SendResult(prior.id, to, False, local=True, delivery=REPLAYED)
    published = state.send_outcome(prior) == "acked"
    if not published and any(env["id"] == prior.id for env in state.pending(now)):
        # The first attempt may have died before its push: a retry makes progress.
        try:
            publish(ctx, state, view, now)
        except MailError as exc:
            print(f"agentpost mail: queued, not yet published: {exc.message}", file=sys.stderr)
        published = _offered_on_remote(ctx, prior.id)
    return SendResult(prior.id, to, published, delivery=REPLAYED)


def _offered_on_remote(ctx: MailContext, msg_id: str) -> bool:
    # Our tracking copy of our own mail ref is what the remote held at the last
    # fetch or push: the note is published if it is there.
    shown = _known_view(ctx).mail.get(ctx.machine)
    return isinstance(shown, MailDoc) and any(
        isinstance(env, dict) and env.get("id") == msg_id for env in shown.outbox
    )


def _send_local(ctx: MailContext, rec: Sent, to: Address, instance_id: str) -> SendResult:
    raw = rec.envelope
    inbox = ctx.inbox(instance_id)
    if inbox.unread_count() >= inbox_capacity():
        raise InboxFull(f"{to.name}'s inbox holds {inbox_capacity()} unread messages")
    # Log first: if we crash before the inbox write, the next sync delivers it.
    ctx.log.append([rec])
    if inbox.deliver(InboxMessage.from_envelope(raw, raw["sent_at"])) is Delivery.FULL:
        raise InboxFull(f"{to.name}'s inbox is full")
    return SendResult(raw["id"], to, False, local=True)


def redeliver_local(ctx: MailContext, state: MailState, now: datetime) -> None:
    """Finish local sends a crash cut between the log and the inbox write."""
    for raw in state.local_sends(now):
        instance_id = raw["to"].get("instance_id")
        if not isinstance(instance_id, str) or instance_id not in state.instances:
            continue
        inbox = ctx.inbox(instance_id)
        if not inbox.holds(str(raw["from"]["machine"]), raw["id"]):
            inbox.deliver(InboxMessage.from_envelope(raw, format_ts(now)))


def read_inbox(ctx: MailContext, *, include_read: bool) -> list[InboxMessage]:
    """The acting session's unread messages (and read ones if asked); unread become read."""
    state = ctx.load_state()
    inbox = ctx.inbox(ctx.acting_instance(state).instance_id)
    unread = inbox.unread()
    shown = [*inbox.read_messages(), *unread] if include_read else unread
    inbox.mark_read([m.key for m in unread])
    return sorted(shown, key=lambda m: (m.sent_at, m.id))


def outbox(ctx: MailContext) -> list[RawEnvelope]:
    """Messages this machine sent that no recipient has acknowledged yet."""
    return ctx.load_state().pending(clock.now())


def compact(ctx: MailContext) -> tuple[int, int]:
    """Rewrite the log keeping only what outbox, acks, dedup and pins need; (before, after)."""
    if not ctx.in_use():
        return 0, 0  # nothing to compact, and nothing to create on a clone without mail
    with mail_lock(ctx.paths.lock, LOCK_WAIT_SECONDS):
        now = clock.now()
        read = ctx.log.read()
        state = ctx.load_state()
        # Local sends leave the log here; make sure each reached its inbox first.
        redeliver_local(ctx, state, now)
        needed = state.needed_records(now)
        ctx.log.replace(needed)
        for inst in state.instances.values():
            ctx.inbox(inst.instance_id).prune_read(now)
        return read.lines, len(needed)


def trust(ctx: MailContext, machine: str) -> Pinned:
    """Pin the key `machine` presents now, replacing an earlier pin (after a key change)."""
    check_name(machine, "machine")
    with mail_lock(ctx.paths.lock, LOCK_WAIT_SECONDS):
        ctx.git.fetch(ctx.remote)
        doc = read_view(ctx.git, ctx.remote).valid_presence().get(machine)
        if doc is None:
            raise UnknownMachine(f"machine {machine} publishes no readable presence")
        rec = Pinned(machine, doc.public_key, format_ts(clock.now()))
        ctx.log.append([rec])
        return rec


def _known_view(ctx: MailContext) -> RemoteView:
    # What the last fetch showed; reading it is local, so sends stay one push.
    try:
        return read_view(ctx.git, ctx.remote)
    except MailError:
        return RemoteView()
