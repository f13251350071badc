"""Hooks a coding agent calls: `mail hook session-start|prompt|stop` (docs/mail.md).

A hook never fails the agent: it exits 0 and says in one stderr line what went
wrong. On a clone that never used mail it returns before any git work or file write.
session-start and prompt sync at most every 30 s and show new messages; stop
republishes while anything is unacknowledged, at least every 10 minutes.
"""

from __future__ import annotations

import sys

from agentpost.mail import clock
from agentpost.mail.address import renamed_machines
from agentpost.mail.context import MailContext
from agentpost.mail.errors import MailBusy, MailError, NotJoined
from agentpost.mail.inbox import InboxMessage
from agentpost.mail.limits import HOOK_SYNC_EVERY, REPUBLISH_EVERY
from agentpost.mail.marks import load_marks
from agentpost.mail.state import MailState
from agentpost.mail.sync import SyncReport, sync
from agentpost.mail.view import read_view

EVENTS = ("session-start", "prompt", "stop")


def run_hook(ctx: MailContext, event: str) -> str:
    """What the hook prints for the agent to see ("" for nothing)."""
    if not ctx.in_use():
        return ""
    if event == "stop":
        _republish_if_due(ctx)
        return ""
    report = _sync_if_due(ctx)
    warning = ""
    for machine in report.key_changed if report else []:
        warning += (
            f"agentpost mail: WARNING machine {machine} presents a different key than the one "
            f"pinned; its mail is refused. If expected, run `agentpost mail trust {machine}`.\n"
        )
    return warning + _surface(ctx)


def _sync_if_due(ctx: MailContext) -> SyncReport | None:
    since = load_marks(ctx.paths.state).since_hook_sync(clock.now())
    if since is not None and 0 <= since < HOOK_SYNC_EVERY.total_seconds():
        return None
    return _quiet_sync(ctx)


def _republish_if_due(ctx: MailContext) -> None:
    now = clock.now()
    marks = load_marks(ctx.paths.state)
    if marks.push_pending:
        # Retry a failed push, but not more often than the prompt hook fetches: an
        # offline laptop should not pay a git timeout at the end of every turn.
        since = marks.since_hook_sync(now)
        if since is not None and 0 <= since < HOOK_SYNC_EVERY.total_seconds():
            return
    else:
        if not ctx.load_state().pending(now):
            return
        since = marks.since_publish(now)
        if since is not None and 0 <= since < REPUBLISH_EVERY.total_seconds():
            return
    _quiet_sync(ctx)


def _quiet_sync(ctx: MailContext) -> SyncReport | None:
    try:
        return sync(ctx, wait_seconds=0, hook=True)
    except MailBusy:
        return None  # another terminal is syncing this clone right now; it does the same work
    except MailError as exc:
        print(f"agentpost mail: sync skipped: {exc.message} ({exc.code})", file=sys.stderr)
        return None


def _surface(ctx: MailContext) -> str:
    state = ctx.load_state()
    try:
        me = ctx.acting_instance(state)
    except NotJoined:
        waiting = {
            inst.name: n
            for inst in state.instances.values()
            if (n := ctx.inbox(inst.instance_id).unread_count())
        }
        if not waiting:
            return ""
        names = ", ".join(f"{name} ({n})" for name, n in sorted(waiting.items()))
        return (
            f"agentpost mail: unread messages for {names}; set AGENTPOST_INSTANCE_ID "
            "and run `agentpost mail inbox`\n"
        )
    inbox = ctx.inbox(me.instance_id)
    messages = inbox.unread()
    if not messages:
        return ""
    text = render(me.name, messages, _renamed(ctx, state))
    inbox.mark_read([m.key for m in messages])
    return text


def _renamed(ctx: MailContext, state: MailState) -> dict[str, str]:
    # What the last fetch showed; reading it is local. Without it, names stay as written.
    try:
        return renamed_machines(state, read_view(ctx.git, ctx.remote))
    except MailError:
        return {}


def render(
    name: str, messages: list[InboxMessage], renamed: dict[str, str] | None = None
) -> str:
    """A short readable block: who wrote, when, what, and how to answer.

    `renamed` maps a former machine name to the current one: a note keeps the name it
    was signed under, but a reply must go to the name the machine has now.
    """
    renamed = renamed or {}
    noun = "message" if len(messages) == 1 else "messages"
    lines = [f"agentpost mail: {len(messages)} new {noun} for {name}"]
    for msg in messages:
        sender = msg.sender
        machine = str(sender.get("machine"))
        now_as = f" (now {sender.get('name')}@{renamed[machine]})" if machine in renamed else ""
        lines.append(
            f"- from {sender.get('name')}@{machine}{now_as} at {msg.sent_at} (id {msg.id}):"
        )
        lines.extend(f"    {line}" for line in msg.body.splitlines() or [""])
    first = messages[0].sender
    machine = str(first.get("machine"))
    # NAME@MACHINE, the form that stays unambiguous when the name is on two machines.
    lines.append(
        f"Reply with: agentpost mail send --to {first.get('name')}@{renamed.get(machine, machine)} "
        "--text '...'"
    )
    return "\n".join(lines) + "\n"
