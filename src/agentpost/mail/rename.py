"""`mail rename-machine NEW` and `mail forget MACHINE` (docs/mail.md).

Renaming moves this clone's presence and mail refs to NEW and deletes the old ones,
locally and on the remote, keeping the machine key (peers see the same key under a
new name, so acks and replies follow it). Forgetting drops a stale peer: its refs here,
on the remote only where no note would be lost, and its pinned key only when asked.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime

from agentpost.mail import clock
from agentpost.mail.clock import format_ts, parse_ts
from agentpost.mail.context import MailContext
from agentpost.mail.errors import InvalidName, MachineNameTaken, RenameBlocked, UnknownMachine
from agentpost.mail.identity import Identity, load_identity, save_identity
from agentpost.mail.limits import LOCK_WAIT_SECONDS
from agentpost.mail.lock import mail_lock
from agentpost.mail.log import Expired, Forgotten, Record
from agentpost.mail.publish import publish
from agentpost.mail.repo import check_name
from agentpost.mail.state import MailState
from agentpost.mail.view import RemoteView, read_view, tracking_ref
from agentpost.mail.wire import MailDoc, mail_ref, presence_ref


@dataclass(frozen=True)
class RenameResult:
    machine: str
    former: str
    published: bool
    withdrawn: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "machine": self.machine,
            "former": self.former,
            "published": self.published,
            "withdrawn": self.withdrawn,
        }


def rename_machine(ctx: MailContext, new: str, *, force: bool = False) -> RenameResult:
    """Make this clone machine `new`; its refs under the old name are moved, then deleted."""
    check_name(new, "machine")
    with mail_lock(ctx.paths.lock, LOCK_WAIT_SECONDS):
        old = ctx.remembered_machine()
        if new == old:
            return RenameResult(new, old, False)
        now = clock.now()
        state = ctx.load_state()
        ctx.git.fetch(ctx.remote)
        view = read_view(ctx.git, ctx.remote)
        key = ctx.key()
        claimed = view.valid_presence().get(new)
        if claimed is not None and claimed.public_key != key.public_b64:
            raise MachineNameTaken(
                f"machine {new} already publishes presence with another key; pick another name"
            )
        pending = state.pending(now)
        if pending and not force:
            raise RenameBlocked(
                f"{len(pending)} note(s) sent as {old} are not acknowledged yet, and their "
                f"recipients accept them only from {old}'s ref. Run `agentpost mail sync` "
                "until `agentpost mail outbox` is empty, or pass --force to withdraw them "
                "(their senders here are told they may not have been read)",
                extra={"pending": [env["id"] for env in pending]},
            )
        records: list[Record] = []
        for env in pending:
            to = env["to"]
            print(
                f"agentpost mail: message {env['id']} to {to.get('name')}@{to.get('machine')} "
                f"withdrawn by the rename of {old}; it may not have been read",
                file=sys.stderr,
            )
            records.append(Expired(str(env["id"]), format_ts(now)))
        # Withdrawals are logged first: a crash before the identity is saved leaves them
        # withdrawn (and said so) under the old name, never re-offered under the new one.
        ctx.log.append(records)
        for rec in records:
            state.apply(rec)
        ident = load_identity(ctx.paths) or Identity(old)
        former = [n for n in [*ident.former, old] if n != new]
        # The point of no return: from here on this clone is `new`.
        save_identity(ctx.paths, Identity(new, former))
        ctx.adopt_machine(new)
        for ref in (presence_ref(old), mail_ref(old)):
            ctx.git.delete_ref(ref)
        outcome = publish(ctx, state, view, now)
        # `published` says the rename reached the remote (presence under NEW, the old refs
        # gone), whether or not this clone had a mail ref to move.
        withdrawn = [str(env["id"]) for env in pending]
        return RenameResult(new, old, outcome.pushed, withdrawn)


@dataclass(frozen=True)
class ForgetResult:
    machine: str
    removed: list[str]
    kept: list[dict[str, str]]
    unpinned: bool

    def to_json(self) -> dict[str, object]:
        return {
            "machine": self.machine,
            "removed": self.removed,
            "kept": self.kept,
            "unpinned": self.unpinned,
        }


def forget(ctx: MailContext, machine: str, *, unpin: bool = False) -> ForgetResult:
    """Drop a stale peer: addressing stops offering it, its refs go where that is safe."""
    check_name(machine, "machine")
    if machine == ctx.machine:
        raise InvalidName(f"{machine} is this clone; use `agentpost mail rename-machine`")
    with mail_lock(ctx.paths.lock, LOCK_WAIT_SECONDS):
        now = clock.now()
        ctx.git.fetch(ctx.remote)
        view = read_view(ctx.git, ctx.remote)
        state = ctx.load_state()
        if not _known(machine, state, view):
            # A typo must not log a Forgotten line (and, with --unpin, drop nothing).
            raise UnknownMachine(
                f"no machine {machine} is known here: {ctx.remote} holds no presence or "
                f"mail ref of it, and no key or mail from it was seen. Nothing was changed; "
                f"check the name (`git ls-remote {ctx.remote} 'refs/agentpost/*'` lists the machines)"
            )
        doomed, kept = _safe_to_delete(machine, view, now)
        removed: list[str] = []
        if doomed:
            result = ctx.git.push(ctx.remote, [], delete=doomed)
            if result.ok:
                removed = doomed
                for ref in doomed:
                    ctx.git.delete_ref(tracking_ref(ctx.remote, ref))
            else:
                kept.extend({"ref": ref, "reason": result.detail} for ref in doomed)
        rec = Forgotten(machine, format_ts(now), unpin)
        ctx.log.append([rec])
        return ForgetResult(machine, removed, kept, unpin)


def _known(machine: str, state: MailState, view: RemoteView) -> bool:
    """`machine` is something to forget: refs on the remote, a pin, its mail, an earlier forget."""
    return (
        machine in view.presence
        or machine in view.mail
        or machine in state.pins
        or machine in state.forgotten
        or any(sender == machine for sender, _ in state.imported)
    )


def _safe_to_delete(
    machine: str, view: RemoteView, now: datetime
) -> tuple[list[str], list[dict[str, str]]]:
    """The peer's remote refs whose deletion loses no note, and the others with why."""
    doomed: list[str] = []
    kept: list[dict[str, str]] = []
    doc = view.mail.get(machine)
    if doc is not None:
        live = _live_notes(doc, now) if isinstance(doc, MailDoc) else -1
        if live == 0:
            doomed.append(mail_ref(machine))
        else:
            why = (
                f"it still offers {live} unexpired note(s) that their recipients may not have "
                "imported yet"
                if live > 0
                else "it cannot be read, so it may still carry notes"
            )
            kept.append({"ref": mail_ref(machine), "reason": why})
    if machine in view.presence:
        if kept:
            # Recipients that never saw this machine pin its key from presence: without
            # it they would refuse the notes kept above as unknown_key.
            why = "its mail ref still offers notes, and their recipients need its key"
            kept.append({"ref": presence_ref(machine), "reason": why})
        else:
            # Presence only serves addressing; a live machine republishes it at its next sync.
            doomed.insert(0, presence_ref(machine))
    return doomed, kept


def _live_notes(doc: MailDoc, now: datetime) -> int:
    live = 0
    for env in doc.outbox:
        expires = env.get("expires_at") if isinstance(env, dict) else None
        try:
            if not isinstance(expires, str) or parse_ts(expires) > now:
                live += 1  # unreadable counts as live: deleting it could lose a note
        except ValueError:
            live += 1
    return live

