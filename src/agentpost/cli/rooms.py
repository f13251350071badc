"""`agentpost room create`, `post`, `tail`, `capabilities`: the member's commands."""

from __future__ import annotations

import io
import mimetypes
from collections.abc import Iterator
from pathlib import Path

import click
import msgspec
from rich.markup import escape

from agentpost.cli.app import main
from agentpost.cli.common import (
    cell,
    client,
    console,
    emit,
    fields,
    hub_errors,
    hub_options,
    json_option,
    one_line,
    say,
    say_line,
    table,
)
from agentpost.cli.common import (
    follow as follow_stream,
)
from agentpost.client import Event

# Why a post woke whom, as the hub names its route (docs/glossary.md), in words for people;
# `--json` keeps the name (`route`).
ROUTES_IN_WORDS = {
    "mention": "mentioned",
    "no_mention": "no one was mentioned",
    "sole_agent": "the room's one agent",
    "no_sole_agent": "no @mention, and the room has no single agent to wake",
    "master": "the room's master agent",
    "master_fallback": "the master agent, as no one else was named",
    "master_unavailable": "the master agent is not in the room",
    "not_participant": "who was mentioned is not in the room",
    "router": "chosen by the room's router",
    "router_none": "the room's router wakes no one",
    "router_stop": "the room's router chose to wake no one",
    "stop": "a stop",
    "stop_no_agent": "a stop, with no agent to stop",
    "notice": "a notice",
}


def _event_line(ev: Event, answers: dict[str, str] | None = None) -> str:
    """One event as people read it; `answers`: event id → `#seq` of the events shown so
    far, so a reply names the message it answers by its number where it can."""
    answers = answers or {}
    files = "".join(f" [cyan]{escape(f'[{a.name} {a.size}B]')}[/cyan]" for a in ev.attachments)
    kind = f" [magenta]({ev.reply_kind})[/magenta]" if ev.reply_kind else ""
    to = f" [dim]→ {', '.join(ev.targets)}[/dim]" if ev.targets else ""
    text = escape(one_line(ev.text))
    if ev.in_reply_to is not None:
        text = f"[dim](answers {answers.get(ev.in_reply_to, ev.in_reply_to)})[/dim] {text}"
    if ev.relates_to is not None:  # an edit, a reaction, a redaction (docs/api.md)
        what = ev.metadata.get("emoji", "") if ev.type == "reaction" else ev.text
        text = f"[dim]{ev.type} of {ev.relates_to}[/dim] {escape(str(what))}"
    elif ev.redacted and "retention" in ev.metadata:  # docs/operations.md "Retention"
        text = "[dim](expired under the room's retention)[/dim]"
    elif ev.redacted:
        text = "[dim](message deleted)[/dim]"
    elif ev.edited:
        text += " [dim](edited)[/dim]"
    marks = "".join(f" {escape(r.emoji)}{r.count}" for r in ev.reactions)
    seq = f"{ev.seq:>5}" if console.is_terminal else str(ev.seq)
    return fields(
        f"[dim]{seq}[/dim]",
        f"[dim]{ev.created_at}[/dim]",
        f"[bold]{ev.sender}[/bold]{kind}:",
        f"{text}{files}{to}{marks}",
    )


@main.group()
def room() -> None:
    """Rooms."""


@room.command("create")
@click.argument("name")
@click.option("--workspace", "-w", default=None, help="Workspace name (default: your token's).")
@click.option("--participant", "-p", "participants", multiple=True, help="Member to add (repeat).")
@click.option(
    "--mode", type=click.Choice(["dynamic", "master"]), default="dynamic", show_default=True
)
@click.option("--master", default=None, help="The master agent (master mode).")
@hub_options
@json_option
def room_create(
    name: str,
    workspace: str | None,
    participants: tuple[str, ...],
    mode: str,
    master: str | None,
    hub: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Create room NAME in WORKSPACE (you become a participant)."""
    with hub_errors(as_json), client(hub, token) as c:
        ws = workspace or str(c.me()["workspace"]["name"])
        r = c.create_room(ws, name, list(participants), mode, master)
    emit(
        as_json,
        {"room": msgspec.to_builtins(r)},
        lambda: table(
            ["id", "name", "mode", "participants"],
            [[r.id, r.name, r.mode, ", ".join(r.participants)]],
        ),
    )


@main.command()
@click.argument("room_ref", metavar="ROOM")
@click.option(
    "--text", "-t", default="", help="Message text (or the file's caption); `-` reads stdin."
)
@click.option(
    "--file",
    "-f",
    "file_",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path),
    default=None,
    help="Upload a file as a media event; `-` reads it from stdin (name it with --name).",
)
@click.option(
    "--name",
    "file_name",
    default=None,
    help="The uploaded file's name (default: the file's own; `stdin` for `-f -`).",
)
@click.option(
    "--idempotency-key",
    "-k",
    default=None,
    help="Send again with the same key after a failure: posted at most once.",
)
@click.option("--in-reply-to", default=None, help="The event this replies to (an event id).")
@click.option(
    "--reply-kind",
    type=click.Choice(["result", "error", "needs_input", "cancelled"]),
    default=None,
    help="With --in-reply-to a delegation: report the outcome back (a receipt).",
)
@hub_options
@json_option
def post(
    room_ref: str,
    text: str,
    file_: Path | None,
    file_name: str | None,
    idempotency_key: str | None,
    in_reply_to: str | None,
    reply_kind: str | None,
    hub: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Post a message (or a file) into ROOM (an id, or a room name of yours).

    \b
    agentpost post general -t "deploy at noon @bot"
    git log -1 | agentpost post general -t -
    agentpost post general -f report.pdf -t "the report"
    """
    from_stdin = [flag for flag, v in (("-t", text), ("-f", str(file_))) if v == "-"]
    if len(from_stdin) == 2:
        raise click.UsageError("-t - and -f - both read stdin: give one of them a value")
    if text == "-":
        text = click.get_text_stream("stdin").read()
    if not text.strip() and file_ is None:
        raise click.UsageError("nothing to post: give --text TEXT (or -t - for stdin), or --file")
    with hub_errors(as_json), client(hub, token) as c:
        room_id = c.resolve_room(room_ref)
        if file_ is not None and str(file_) == "-":
            name = file_name or "stdin"
            mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
            data = io.BytesIO(click.get_binary_stream("stdin").read())
            res = c.upload_file(
                room_id, data, name, caption=text, key=idempotency_key, mime_type=mime
            )
        elif file_ is not None:
            name = file_name or file_.name
            mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
            with open(file_, "rb") as f:
                res = c.upload_file(
                    room_id, f, name, caption=text, key=idempotency_key, mime_type=mime
                )
        else:
            res = c.post_message(
                room_id, text, key=idempotency_key, in_reply_to=in_reply_to, reply_kind=reply_kind
            )
    data = msgspec.to_builtins(res)

    def human() -> None:
        ev = res.event
        if res.idempotency_status == "replayed":
            say(
                f"replayed {ev.id} seq {ev.seq}: posted before with this key; nothing new was "
                "posted and no one was woken again"
            )
            return
        woke = ", ".join(ev.targets) or "no one"
        why = ROUTES_IN_WORDS.get(ev.route or "", ev.route)
        say(
            f"posted {ev.id} seq {ev.seq}; woke {woke} ({why})"
            if why
            else f"posted {ev.id} seq {ev.seq}; woke {woke}"
        )

    emit(as_json, data, human)


@main.command()
@click.argument("room_ref", metavar="ROOM")
@click.option("--after", default=0, show_default=True, help="Start after this seq.")
@click.option("--follow", "-F", is_flag=True, help="Keep streaming new events (SSE).")
@hub_options
@json_option
def tail(
    room_ref: str, after: int, follow: bool, hub: str, token: str | None, as_json: bool
) -> None:
    """Print ROOM's events; with --follow keep printing new ones as they arrive."""

    seen: dict[str, str] = {}  # id → "#seq" of what was shown: a reply names its message

    def show(ev: Event) -> None:
        emit(
            as_json,
            msgspec.to_builtins(ev),
            lambda: say_line(_event_line(ev, seen)),
        )
        if len(seen) > 100_000:
            seen.clear()
        seen[ev.id] = f"#{ev.seq}"

    with hub_errors(as_json), client(hub, token) as c:
        room_id = c.resolve_room(room_ref)
        if follow:

            def fresh(pos: int | None) -> Iterator[Event]:
                return c.stream(room_id, pos or 0)

            follow_stream(fresh, lambda ev: ev.seq, show, after)
            return
        while True:
            page = c.events(room_id, after, 1000)
            if not page:
                return
            for ev in page:
                show(ev)
            after = page[-1].seq


@main.command()
@hub_options
@json_option
def capabilities(hub: str, token: str | None, as_json: bool) -> None:
    """What the hub (and this CLI) can do."""
    from agentpost.cli.thread import CLI_CAPABILITIES

    with hub_errors(as_json), client(hub, None, need_token=False) as c:
        caps = {**c.capabilities(), **CLI_CAPABILITIES}
    emit(as_json, caps, lambda: _show_capabilities(caps))


def _show_capabilities(caps: dict[str, object], prefix: str = "") -> None:
    """One `name: value` line per capability (nested ones as `parent.name`)."""
    for name, value in caps.items():
        if isinstance(value, dict):
            _show_capabilities(value, f"{prefix}{name}.")
        elif isinstance(value, list):
            say(f"{prefix}{name}: {', '.join(str(v) for v in value) or '(none)'}")
        else:
            say(f"{prefix}{name}: {cell(value)}")
