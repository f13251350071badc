"""Publishing this machine's presence and mail refs (docs/mail.md).

The documents are derived from the log. A ref is rewritten only when its content
differs from what the remote showed (or the 10-minute republish is due), then both
refs go out in one force-push. A refused or failed push leaves everything queued;
the next sync sees the remote still differs and tries again.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime

from agentpost.mail.clock import format_ts
from agentpost.mail.context import MailContext
from agentpost.mail.git import Git
from agentpost.mail.keys import MachineKey, sign_document
from agentpost.mail.marks import load_marks, save_marks, stamp
from agentpost.mail.state import MailState
from agentpost.mail.view import RemoteView, tracking_ref
from agentpost.mail.wire import (
    DocumentError,
    InstanceEntry,
    MailDoc,
    PresenceDoc,
    ack_entry,
    content_digest,
    encode,
    mail_ref,
    presence_ref,
)


@dataclass(frozen=True)
class PublishOutcome:
    published: bool  # the mail ref reached the remote in this call
    attempted: bool  # something needed pushing
    detail: str
    pushed: bool = False  # whatever needed pushing (presence, mail, deletions) reached it


def presence_doc(ctx: MailContext, state: MailState, key: MachineKey, now: datetime) -> PresenceDoc:
    instances = [
        InstanceEntry(inst.instance_id, inst.name, inst.at) for inst in state.instances.values()
    ]
    return PresenceDoc(ctx.machine, format_ts(now), key.public_b64, instances)


def mail_doc(ctx: MailContext, state: MailState, now: datetime) -> MailDoc:
    acks = [ack_entry(machine, msg_id) for machine, msg_id in state.acks(now)]
    return MailDoc(ctx.machine, format_ts(now), state.pending(now), acks)


def publish(
    ctx: MailContext,
    state: MailState,
    view: RemoteView,
    now: datetime,
    *,
    force_mail: bool = False,
) -> PublishOutcome:
    """Bring the remote's copy of our two refs up to date with the log; push once."""
    key = ctx.key()
    remote = ctx.remote
    changed: dict[str, str] = {}
    docs: list[tuple[str, PresenceDoc | MailDoc, PresenceDoc | MailDoc | DocumentError | None]] = []
    if state.instances:
        docs.append(
            (
                presence_ref(ctx.machine),
                presence_doc(ctx, state, key, now),
                view.presence.get(ctx.machine),
            )
        )
    mail = mail_doc(ctx, state, now)
    shown_mail = view.mail.get(ctx.machine)
    # A machine that never had anything to say publishes no mail ref at all.
    if mail.outbox or mail.acks or shown_mail is not None:
        docs.append((mail_ref(ctx.machine), mail, shown_mail))
    stale = _former_refs(ctx, view, key)
    for ref, doc, shown in docs:
        same = isinstance(shown, type(doc)) and content_digest(shown) == content_digest(doc)
        if isinstance(doc, MailDoc) and not view.mail_signed_by(ctx.machine, key.public_b64):
            same = False  # someone else wrote our ref, even if it says the same: take it back
        if same and not (force_mail and isinstance(doc, MailDoc) and doc.outbox):
            continue
        message = encode(doc)
        sha = ctx.git.write_document(message, sign_document(key, message))
        ctx.git.update_ref(ref, sha)
        changed[ref] = sha
    if not changed and not stale:
        return PublishOutcome(False, False, "")
    result = ctx.git.push(remote, list(changed), delete=stale)
    marks = load_marks(ctx.paths.state)
    marks.push_pending = not result.ok
    if result.ok:
        marks.published_at = stamp(now)
        _remember_pushed(ctx.git, remote, changed)
        for ref in stale:
            ctx.git.delete_ref(tracking_ref(remote, ref))
    else:
        print(
            f"agentpost mail: not published, queued for the next sync: {result.detail}",
            file=sys.stderr,
        )
    save_marks(ctx.paths.state, marks)
    return PublishOutcome(
        result.ok and mail_ref(ctx.machine) in changed, True, result.detail, pushed=result.ok
    )


def _former_refs(ctx: MailContext, view: RemoteView, key: MachineKey) -> list[str]:
    """Refs the remote still shows under this clone's former names, provably ours.

    A rename deletes them in its own push; if that push failed, every later publish
    tries again. A ref under a former name that carries another key is someone else's
    now and is left alone.
    """
    stale: list[str] = []
    for name in sorted(ctx.own_names() - {ctx.machine}):
        presence = view.presence.get(name)
        if isinstance(presence, PresenceDoc) and presence.public_key == key.public_b64:
            stale.append(presence_ref(name))
        if view.mail_signed_by(name, key.public_b64):
            stale.append(mail_ref(name))
    return stale


def _remember_pushed(git: Git, remote: str, pushed: dict[str, str]) -> None:
    # Our tracking copy now equals what the remote holds, so the next send or sync
    # compares against the truth without a fetch.
    for ref, sha in pushed.items():
        git.update_ref(tracking_ref(remote, ref), sha)
