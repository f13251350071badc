"""`agentpost inbox` and `agentpost room settings`: what woke me, and how a room routes."""

from __future__ import annotations

import click
import msgspec
from rich.markup import escape

from agentpost.cli.app import main
from agentpost.cli.common import (
    client,
    console,
    emit,
    fields,
    follow,
    hub_errors,
    hub_options,
    json_option,
    one_line,
    say,
    say_line,
    table,
)
from agentpost.client import Event, HubClient, InboxItem

# The longest wait the hub's inbox route grants (hub/routes/inbox.py MAX_WAIT): a longer one
# is refused here, not cut short there (docs/cli.md "The contract", rule 5).
MAX_WAIT_SECONDS = 60.0


@main.group(invoke_without_command=True)
@click.option("--after", type=int, default=None, help="Start after this cursor (default: acked).")
@click.option(
    "--wait",
    type=click.FloatRange(0, MAX_WAIT_SECONDS),
    default=0.0,
    show_default=True,
    help=f"Long-poll seconds, 0-{MAX_WAIT_SECONDS:g} (the hub waits no longer).",
)
@click.option("--ack", is_flag=True, help="Acknowledge what was shown (advance the cursor).")
@click.option(
    "--follow", "-F", is_flag=True, help="Keep showing new wake-ups as they arrive (SSE)."
)
@hub_options
@json_option
@click.pass_context
def inbox(
    ctx: click.Context,
    after: int | None,
    wait: float,
    ack: bool,
    follow: bool,
    hub: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Show the events that woke you (your inbox), oldest first."""
    if ctx.invoked_subcommand is not None:
        return  # `inbox hook …` (cli/inbox_hook.py)
    if follow:
        _follow_inbox(after, ack, hub, token, as_json)
        return
    with hub_errors(as_json), client(hub, token) as c:
        page = c.inbox(after=after, wait=wait)
        acked = c.ack(page.cursor) if ack and page.items else None
        names = {} if as_json or not page.items else room_names(c)
    data = {**msgspec.to_builtins(page), "acked": acked}

    def human() -> None:
        table(
            ["cursor", "event", "room", "from", "type", "text"],
            [
                [
                    i.cursor,
                    i.event.id,
                    names.get(i.event.room, i.event.room),
                    i.event.sender,
                    _kind(i.event),
                    _preview(i.event.text),
                ]
                for i in page.items
            ],
            empty=f"(nothing new; cursor {page.cursor})",
        )
        if acked is not None:
            say(f"acknowledged up to cursor {acked}")

    emit(as_json, data, human)


def _follow_inbox(after: int | None, ack: bool, hub: str, token: str | None, as_json: bool) -> None:
    """One line per wake-up (NDJSON with --json, like `tail`); --ack acknowledges each
    after it is shown."""
    with hub_errors(as_json), client(hub, token) as c:
        names = room_names(c)

        def show(item: InboxItem) -> None:
            ev = item.event
            if ev.room not in names:
                names.update(room_names(c))  # a room made since we started
            emit(
                as_json,
                msgspec.to_builtins(item),
                lambda: say_line(
                    fields(
                        f"{item.cursor:>5}" if console.is_terminal else str(item.cursor),
                        ev.id,
                        escape(names.get(ev.room, ev.room)),
                        escape(ev.sender),
                        escape(f"{_kind(ev)}:"),
                        escape(one_line(_preview(ev.text, 200))),
                    )
                ),
            )

        def acked(item: InboxItem) -> None:
            c.ack(item.cursor)

        follow(c.inbox_stream, lambda item: item.cursor, show, after, acked if ack else None)


def room_names(c: HubClient) -> dict[str, str]:
    """Room id → name for the rooms of the caller's workspace that it takes part in."""
    me = c.me()
    return {r.id: r.name for r in c.rooms(me["workspace"]["name"])}


def _kind(ev: Event) -> str:
    """The event's type, with its reply kind when it reports back (`message: result`)."""
    return f"{ev.type}: {ev.reply_kind}" if ev.reply_kind else ev.type


def _preview(text: str, width: int = 60) -> str:
    """On a terminal, the text on one line cut to `width`; piped, all of it (one line,
    escaped by the table or `one_line`): a script reads the whole message."""
    if not console.is_terminal:
        return text  # escaped where it is written (the table, `one_line`)
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


@click.command("settings")
@click.argument("room_ref", metavar="ROOM")
@click.option("--mode", type=click.Choice(["dynamic", "master"]), default=None)
@click.option("--master", default=None, help="The master agent (master mode).")
@click.option(
    "--router",
    type=click.Choice(["none", "sole-agent", "llm"]),
    default=None,
    help="Who hears a person's message that mentions no one.",
)
@click.option(
    "--sensitive-filter/--no-sensitive-filter",
    default=None,
    help="Refuse messages that carry well-known secrets.",
)
@click.option(
    "--max-delegation-depth",
    type=int,
    default=None,
    help="How deep agents may delegate before their mentions wake no one (1-100).",
)
@click.option(
    "--agent-wakeups-per-minute",
    type=int,
    default=None,
    help="Agent-caused wake-ups per minute before agents' mentions wake no one.",
)
@hub_options
@json_option
def room_settings(
    room_ref: str,
    mode: str | None,
    master: str | None,
    router: str | None,
    sensitive_filter: bool | None,
    max_delegation_depth: int | None,
    agent_wakeups_per_minute: int | None,
    hub: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Change how ROOM routes (a human participant may)."""
    changes = {
        k: v
        for k, v in {
            "mode": mode,
            "master": master,
            "router": router,
            "sensitive_filter": sensitive_filter,
            "max_delegation_depth": max_delegation_depth,
            "agent_wakeups_per_minute": agent_wakeups_per_minute,
        }.items()
        if v is not None
    }
    with hub_errors(as_json), client(hub, token) as c:
        room_id = c.resolve_room(room_ref)
        resp = c.request("PATCH", f"/v1/rooms/{room_id}", json=changes)
    room = resp.json()["room"]
    emit(
        as_json,
        {"room": room},
        lambda: table(
            ["id", "name", "mode", "master", "router", "sensitive filter", "depth", "wake-ups/min"],
            [
                [
                    room["id"],
                    room["name"],
                    room["mode"],
                    room["master"] if room["mode"] == "master" else None,
                    room["router"],
                    room["sensitive_filter"],
                    room["max_delegation_depth"],
                    room["agent_wakeups_per_minute"],
                ]
            ],
        ),
    )


def _attach() -> None:
    # `inbox hook` is added by cli/inbox_hook.py, which cli/app.py loads beside this
    # module for the `inbox` command.
    from agentpost.cli.rooms import room

    room.add_command(room_settings)


_attach()
