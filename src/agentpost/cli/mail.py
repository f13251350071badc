"""`agentpost mail …` (docs/mail.md): thin commands over `agentpost.mail`.

With `--json` a command prints exactly the shape docs/mail.md "Commands" shows on stdout, or
`{"error": {"code", "message", "retryable"}}` and a non-zero exit; without it, short
human text, and a refusal is one line `error CODE: MESSAGE` on stderr.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from agentpost.cli.app import main
from agentpost.mail.commands import SendResult, compact, join, outbox, read_inbox, send, trust
from agentpost.mail.context import MailContext
from agentpost.mail.errors import InvalidBody, MailError
from agentpost.mail.hooks import EVENTS, run_hook
from agentpost.mail.rename import forget, rename_machine
from agentpost.mail.repair import repair
from agentpost.mail.sync import sync

T = TypeVar("T")


def _run(as_json: bool, action: Callable[[MailContext], T], *, check_machine: bool = True) -> T:
    """Run `action`; a MailError becomes the error body of docs/mail.md "Errors" (or a line) and its
    exit code."""
    try:
        return action(MailContext.discover(check_machine=check_machine))
    except MailError as exc:
        if as_json:
            body = exc.to_json()
            error = body["error"]
            assert isinstance(error, dict)
            # The one error shape of every command (docs/cli.md): retryable unless final.
            error.setdefault("retryable", exc.exit_code != 1)
            _emit(body)
        else:
            # One line, as every command prints a refusal (docs/cli.md).
            click.echo(f"error {exc.code}: {exc.message}", err=True)
        sys.exit(exc.exit_code)
    except Exception as exc:
        # A bug, not a refusal: keep the traceback for the report, answer with a code.
        traceback.print_exc()
        if as_json:
            _emit({"error": {"code": "internal", "message": repr(exc), "retryable": False}})
        sys.exit(70)


def _emit(payload: object) -> None:
    # Compact and UTF-8, like every other command's JSON (docs/cli.md).
    click.echo(json.dumps(payload, ensure_ascii=False, separators=(",", ":")))


@main.group()
def mail() -> None:
    """Notes between agent sessions on different machines, over git refs."""


@mail.command("join")
@click.option("--name", required=True, help="This session's name, unique on this machine.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def join_cmd(name: str, as_json: bool) -> None:
    """Register this session on this machine and publish presence."""
    result = _run(as_json, lambda ctx: join(ctx, name))
    if as_json:
        _emit(result.to_json())
    else:
        click.echo(f"joined as {result.name} on {result.machine}")
        click.echo(f"export AGENTPOST_INSTANCE_ID={result.instance_id}")


@mail.command("send")
@click.option("--to", "to_name", required=True, help="The recipient: NAME or NAME@MACHINE.")
@click.option("--instance-id", default=None, help="Pick one session when the name is ambiguous.")
@click.option("--text", "-t", default=None, help="The message body.")
@click.option(
    "--file",
    "-f",
    "file_",
    type=click.Path(allow_dash=True, dir_okay=False),
    default=None,
    help="Read the body from a file ('-' for stdin).",
)
@click.option(
    "--idempotency-key",
    default=None,
    help="Retry-safe: the same key from the same session sends one note (answer: replayed).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def send_cmd(
    to_name: str,
    instance_id: str | None,
    text: str | None,
    file_: str | None,
    idempotency_key: str | None,
    as_json: bool,
) -> None:
    """Send a note to a session on this or another machine."""
    # A body missing or given twice is a command line that does not parse, as for `post`
    # (docs/cli.md "The contract", rule 4): said before the repository is even looked at.
    if text is not None and file_ is not None:
        raise click.UsageError("give one of --text/-t or --file/-f, not both")
    if file_ is None and not (text or "").strip():
        raise click.UsageError("nothing to send: give --text TEXT, or --file FILE (- for stdin)")

    def act(ctx: MailContext) -> SendResult:
        if file_ is not None:
            try:
                body = sys.stdin.read() if file_ == "-" else Path(file_).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise InvalidBody(f"cannot read {file_}: {exc}") from exc
        else:
            body = text or ""
        return send(ctx, to_name, instance_id, body, idempotency_key)

    result = _run(as_json, act)
    if as_json:
        _emit(result.to_json())
        return
    if result.local:
        state = "delivered to its inbox on this machine"
    elif result.published:
        state = "published"
    else:
        state = "queued; `agentpost mail sync` publishes it"
    verb = "already sent (replayed)" if result.delivery == "replayed" else "sent"
    click.echo(f"{verb} {result.id} to {result.to.name}@{result.to.machine} ({state})")


@mail.command("sync")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def sync_cmd(as_json: bool) -> None:
    """Fetch peers' refs, import mail for this machine, take acks, publish ours."""
    report = _run(as_json, lambda ctx: sync(ctx))
    if as_json:
        _emit(report.to_json())
    else:
        click.echo(
            f"imported {report.imported}, acked {report.acked}, "
            f"published {'yes' if report.published else 'no'}, refused {len(report.refused)}"
        )


@mail.command("inbox")
@click.option("--all", "include_read", is_flag=True, help="Include messages already read.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def inbox_cmd(include_read: bool, as_json: bool) -> None:
    """Show this session's unread messages (and mark them read)."""
    messages = _run(as_json, lambda ctx: read_inbox(ctx, include_read=include_read))
    rows = [{"id": m.id, "from": m.sender, "body": m.body, "sent_at": m.sent_at} for m in messages]
    if as_json:
        _emit({"messages": rows})
        return
    if not rows:
        click.echo("no new messages")
    for m in messages:
        click.echo(f"from {m.sender.get('name')}@{m.sender.get('machine')} at {m.sent_at} ({m.id})")
        click.echo(f"  {m.body}")


@mail.command("outbox")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def outbox_cmd(as_json: bool) -> None:
    """Show messages sent from this machine that are not acknowledged yet."""
    pending = _run(as_json, outbox)
    rows = [
        {"id": e["id"], "to": e["to"], "sent_at": e["sent_at"], "expires_at": e["expires_at"]}
        for e in pending
    ]
    if as_json:
        _emit({"messages": rows})
        return
    for row in rows:
        click.echo(
            f"{row['id']} to {row['to'].get('name')}@{row['to'].get('machine')} sent {row['sent_at']}"
        )


@mail.command("compact")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def compact_cmd(as_json: bool) -> None:
    """Rewrite the mail log keeping only what outbox, acks, dedup and pins need."""
    before, after = _run(as_json, compact)
    if as_json:
        _emit({"lines_before": before, "lines_after": after})
    else:
        click.echo(f"log compacted: {before} lines -> {after}")


@mail.command("repair")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def repair_cmd(as_json: bool) -> None:
    """Set unreadable mail log lines aside (kept in a side file) and recover what refs show."""
    report = _run(as_json, repair)
    if as_json:
        _emit(report.to_json())
        return
    if not report.lines_set_aside:
        click.echo(f"the mail log reads cleanly ({report.lines_kept} lines); nothing to repair")
        return
    click.echo(
        f"set {report.lines_set_aside} unreadable line(s) aside in {report.set_aside_to}; "
        f"kept {report.lines_kept}; recovered {report.recovered_sends} sent note(s) and "
        f"{report.recovered_sessions} session(s) from this machine's refs"
    )


@mail.command("rename-machine")
@click.argument("new")
@click.option(
    "--force", is_flag=True, help="Rename even with unacknowledged notes (they are withdrawn)."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def rename_machine_cmd(new: str, force: bool, as_json: bool) -> None:
    """Rename this clone's mail machine on purpose: refs move to NEW, the old ones go."""
    # The environment may already name NEW: the one command that must not refuse that.
    result = _run(as_json, lambda ctx: rename_machine(ctx, new, force=force), check_machine=False)
    if as_json:
        _emit(result.to_json())
        return
    click.echo(f"this clone is now mail machine {result.machine} (was {result.former})")
    click.echo(f"set AGENTPOST_MACHINE={result.machine} wherever it was {result.former}")


@mail.command("forget")
@click.argument("machine")
@click.option(
    "--unpin", is_flag=True, help="Also drop its pinned key (a new one is trusted on sight)."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def forget_cmd(machine: str, unpin: bool, as_json: bool) -> None:
    """Drop a stale peer: no longer offered as a recipient; its refs removed where safe."""
    result = _run(as_json, lambda ctx: forget(ctx, machine, unpin=unpin))
    if as_json:
        _emit(result.to_json())
        return
    click.echo(
        f"forgot {result.machine}; removed from the remote: {', '.join(result.removed) or 'nothing'}"
    )
    for kept in result.kept:
        click.echo(f"kept {kept['ref']}: {kept['reason']}")


@mail.command("trust")
@click.argument("machine")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def trust_cmd(machine: str, as_json: bool) -> None:
    """Pin the public key MACHINE presents now (after a deliberate key change)."""
    rec = _run(as_json, lambda ctx: trust(ctx, machine))
    if as_json:
        _emit({"machine": rec.machine, "public_key": rec.public_key})
    else:
        click.echo(f"pinned {rec.machine}: {rec.public_key}")


@mail.command("hook")
@click.argument("event", type=click.Choice(EVENTS))
def hook_cmd(event: str) -> None:
    """Run from a coding agent's hook: sync if due and print new messages. Always exits 0."""
    try:
        text = run_hook(MailContext.discover(), event)
    except MailError as exc:
        # Outside a git repo, or misconfigured: a hook must not break the agent's turn.
        if exc.code != "not_a_git_repo":
            click.echo(f"agentpost mail: {exc.message} ({exc.code})", err=True)
        return
    if text:
        click.echo(text, nl=False)
