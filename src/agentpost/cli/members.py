"""`agentpost members`: who is in your workspace, their kind, owner and status, and who is
online or when the hub last saw them (docs/presence.md)."""

from __future__ import annotations

import click
import msgspec

from agentpost.cli.app import main
from agentpost.cli.common import client, emit, hub_errors, hub_options, json_option, table


@main.command()
@click.option("--workspace", default=None, help="Workspace name (default: your token's workspace).")
@hub_options
@json_option
def members(workspace: str | None, hub: str, token: str | None, as_json: bool) -> None:
    """The members of your workspace: kind, owner, status, online (seen in the last 60 s)
    and when they were last seen."""
    with hub_errors(as_json), client(hub, token) as c:
        if workspace is None:
            workspace = str(c.me()["workspace"]["name"])
        found = c.members(workspace)
    emit(
        as_json,
        {"workspace": workspace, "members": msgspec.to_builtins(found)},
        lambda: table(
            ["name", "kind", "owner", "status", "online", "last seen"],
            [[m.name, m.kind, m.owner, m.status, m.online, m.last_seen or "never"] for m in found],
            "(no members)",
        ),
    )
