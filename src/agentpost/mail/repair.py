"""`mail repair`: set unreadable log lines aside, then recover what our refs still show.

The log fails closed on a hole (log.py). Repair moves every unreadable line, byte
for byte, into a side file under `.git/agentpost/`, keeps the readable lines as they
are, and re-adds from this machine's own last published refs what the lost lines may
have held: sent notes still offered (signed by our key) and joined sessions. The rest
of a lost line repairs itself on the next sync (docs/mail.md): imports are deduplicated
by the inbox files, acks and retirements are derived again, keys are pinned again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from agentpost.mail import clock
from agentpost.mail.context import MailContext
from agentpost.mail.envelope import signature_valid
from agentpost.mail.errors import MailError
from agentpost.mail.fsio import atomic_write
from agentpost.mail.limits import LOCK_WAIT_SECONDS
from agentpost.mail.lock import mail_lock
from agentpost.mail.log import Join, Record, Sent
from agentpost.mail.state import MailState
from agentpost.mail.view import RemoteView, read_view
from agentpost.mail.wire import MailDoc, PresenceDoc


@dataclass(frozen=True)
class RepairReport:
    lines_kept: int
    lines_set_aside: int
    set_aside_to: str | None
    recovered_sends: int
    recovered_sessions: int

    def to_json(self) -> dict[str, object]:
        return {
            "lines_kept": self.lines_kept,
            "lines_set_aside": self.lines_set_aside,
            "set_aside_to": self.set_aside_to,
            "recovered_sends": self.recovered_sends,
            "recovered_sessions": self.recovered_sessions,
        }


def repair(ctx: MailContext) -> RepairReport:
    """Make the log readable again, losing no readable line and recovering what we can."""
    if not ctx.in_use():
        return RepairReport(0, 0, None, 0, 0)
    with mail_lock(ctx.paths.lock, LOCK_WAIT_SECONDS):
        good, bad = ctx.log.split_readable()
        if not bad:
            return RepairReport(len(good), 0, None, 0, 0)
        stamp = clock.format_ts(clock.now()).replace(":", "")
        aside = ctx.paths.root / f"log.unreadable-{stamp}-{os.getpid()}.jsonl"
        # The side file first: if we die before the swap, the log is as it was.
        atomic_write(aside, b"".join(line + b"\n" for _, line in bad))
        ctx.log.replace_lines(good)
        state = ctx.load_state()
        recovered = _recover(ctx, state, _own_view(ctx))
        ctx.log.append(recovered)
        sends = sum(1 for r in recovered if isinstance(r, Sent))
        return RepairReport(len(good), len(bad), str(aside), sends, len(recovered) - sends)


def _own_view(ctx: MailContext) -> RemoteView:
    try:
        return read_view(ctx.git, ctx.remote)
    except MailError:
        return RemoteView()  # no remote to look at: recover nothing, lose nothing more


def _recover(ctx: MailContext, state: MailState, view: RemoteView) -> list[Record]:
    records: list[Record] = []
    key = ctx.key()
    mail = view.mail.get(ctx.machine)
    if isinstance(mail, MailDoc):
        for raw in mail.outbox:
            # Only our own notes, provably: signed by this machine's key, from this machine.
            if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
                continue
            sender = raw.get("from")
            if not isinstance(sender, dict) or sender.get("machine") != ctx.machine:
                continue
            if raw["id"] in state.sent or not signature_valid(raw, key.public_b64):
                continue
            records.append(Sent(raw))
    presence = view.presence.get(ctx.machine)
    if isinstance(presence, PresenceDoc) and presence.public_key == key.public_b64:
        for inst in presence.instances:
            if inst.instance_id not in state.instances:
                records.append(Join(inst.instance_id, inst.name, inst.last_seen))
    return records
