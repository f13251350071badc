"""`agentpost inbox` and `agentpost room settings`: what woke me, and how a room routes."""

from __future__ import annotations

import click
import msgspec

from agentpost.cli.app import main
from agentpost.cli.common import client, console, emit, hub_errors, hub_options, json_option, table


@main.command()
@click.option("--after", type=int, default=None, help="Start after this cursor (default: acked).")
@click.option("--wait", type=float, default=0.0, show_default=True, help="Long-poll seconds.")
@click.option("--ack", is_flag=True, help="Acknowledge what was shown (advance the cursor).")
@hub_options
@json_option
def inbox(
    after: int | None, wait: float, ack: bool, hub: str, token: str | None, as_json: bool
) -> None:
    """Show the events that woke you (your inbox), oldest first."""
    with hub_errors(as_json), client(hub, token) as c:
        page = c.inbox(after=after, wait=wait)
        acked = c.ack(page.cursor) if ack and page.items else None
    data = {**msgspec.to_builtins(page), "acked": acked}

    def human() -> None:
        table(
            ["cursor", "room", "from", "kind", "route", "text"],
            [
                [
                    i.cursor,
                    i.event.room,
                    i.event.sender,
                    i.event.reply_kind,
                    i.event.route,
                    i.event.text[:60],
                ]
                for i in page.items
            ],
        )
        if acked is not None:
            console.print(f"acknowledged up to cursor {acked}")

    emit(as_json, data, human)


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
@hub_options
@json_option
def room_settings(
    room_ref: str,
    mode: str | None,
    master: str | None,
    router: str | None,
    sensitive_filter: bool | None,
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
            ["id", "name", "mode", "master", "router", "sensitive_filter"],
            [
                [
                    room["id"],
                    room["name"],
                    room["mode"],
                    room["master"],
                    room["router"],
                    room["sensitive_filter"],
                ]
            ],
        ),
    )


def _attach() -> None:
    from agentpost.cli.rooms import room

    room.add_command(room_settings)


_attach()
