"""`agentpost admin …`: workspaces and members, with the admin token."""

from __future__ import annotations

import click
import msgspec

from agentpost.cli import secrets
from agentpost.cli.app import main
from agentpost.cli.common import (
    admin_token,
    client,
    console,
    emit,
    hub_errors,
    json_option,
    retention_change,
    say,
    table,
)


def _warn_on_argv(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and secrets.on_argv(ctx, "admin_tok"):
        secrets.warn_on_argv(
            "--admin-token", "env AGENTPOST_ADMIN_TOKEN or the data dir's admin.token"
        )
    return value


def _admin_options(f):  # noqa: ANN001, ANN202
    f = click.option(
        "--admin-token",
        "admin_tok",
        default=None,
        callback=_warn_on_argv,
        help="Admin token (default: env AGENTPOST_ADMIN_TOKEN or the data dir's admin.token). "
        "Every local user can read a flag value in the process list.",
    )(f)
    f = click.option(
        "--hub",
        envvar="AGENTPOST_HUB",
        default="http://127.0.0.1:8470",
        show_default=True,
        help="Hub URL (env AGENTPOST_HUB).",
    )(f)
    return f


@main.group()
def admin() -> None:
    """Administer workspaces and members (needs the admin token)."""


@admin.group()
def workspace() -> None:
    """Workspaces."""


@workspace.command("create")
@click.argument("name")
@_admin_options
@json_option
def workspace_create(name: str, hub: str, admin_tok: str | None, as_json: bool) -> None:
    """Create workspace NAME."""
    with hub_errors(as_json), client(hub, admin_token(admin_tok)) as c:
        ws = c.create_workspace(name)
    emit(
        as_json,
        {"workspace": ws},
        lambda: console.print(f"workspace [bold]{ws['name']}[/bold] created ({ws['id']})"),
    )


@workspace.command("list")
@_admin_options
@json_option
def workspace_list(hub: str, admin_tok: str | None, as_json: bool) -> None:
    """Every workspace on the hub."""
    with hub_errors(as_json), client(hub, admin_token(admin_tok)) as c:
        found = c.list_workspaces()
    emit(
        as_json,
        {"workspaces": found},
        lambda: table(["name", "id"], [[w["name"], w["id"]] for w in found], "(no workspaces)"),
    )


@admin.group()
def member() -> None:
    """Members: people and agents."""


@member.command("add")
@click.argument("workspace")
@click.argument("name")
@click.option("--kind", type=click.Choice(["human", "agent"]), default="human", show_default=True)
@click.option(
    "--owner",
    default=None,
    help="For an agent: the person who runs it (its Worker answers them). Required for an "
    "agent unless --no-owner.",
)
@click.option(
    "--no-owner",
    is_flag=True,
    help="An agent with no owner, on purpose: its Worker answers only --collaborator names.",
)
@_admin_options
@json_option
def member_add(
    workspace: str,
    name: str,
    kind: str,
    owner: str | None,
    no_owner: bool,
    hub: str,
    admin_tok: str | None,
    as_json: bool,
) -> None:
    """Add member NAME to WORKSPACE; prints its token once."""
    if kind == "agent" and owner is None and not no_owner:
        raise click.UsageError(
            "an agent needs --owner PERSON (the member its Worker answers); pass --no-owner "
            "to make one that answers only the collaborators its Worker is given"
        )
    if owner is not None and (no_owner or kind != "agent"):
        raise click.UsageError("--owner is for an agent, and not with --no-owner")
    with hub_errors(as_json), client(hub, admin_token(admin_tok)) as c:
        made = c.add_member(workspace, name, kind, owner)
    data = {
        "member": {
            "id": made.member.id,
            "name": made.member.name,
            "kind": made.member.kind,
            "status": made.member.status,
            "owner": made.member.owner,
        },
        "token": made.token,
    }

    def human() -> None:
        table(
            ["name", "kind", "owner", "token"],
            [[made.member.name, made.member.kind, made.member.owner, made.token]],
        )
        console.print("Keep the token: it is shown only once.")

    emit(as_json, data, human)


@member.command("remove")
@click.argument("workspace")
@click.argument("name")
@click.option("--hard", is_flag=True, help="Delete the member instead of marking it removed.")
@_admin_options
@json_option
def member_remove(
    workspace: str, name: str, hard: bool, hub: str, admin_tok: str | None, as_json: bool
) -> None:
    """Remove member NAME from WORKSPACE (refused at once on its next request)."""
    with hub_errors(as_json), client(hub, admin_token(admin_tok)) as c:
        gone = c.remove_member(workspace, name, hard)
    emit(
        as_json,
        {"member": {"name": gone.name, "status": "removed"}, "hard": hard},
        lambda: console.print(
            f"member [bold]{gone.name}[/bold] removed" + (" (hard)" if hard else "")
        ),
    )


@member.command("set-owner")
@click.argument("workspace")
@click.argument("name")
@click.option("--owner", default=None, help="The person who runs agent NAME from now on.")
@click.option("--no-owner", is_flag=True, help="Agent NAME has no owner from now on.")
@_admin_options
@json_option
def member_set_owner(
    workspace: str,
    name: str,
    owner: str | None,
    no_owner: bool,
    hub: str,
    admin_tok: str | None,
    as_json: bool,
) -> None:
    """Name the owner of agent NAME in WORKSPACE (its Worker answers them): the way an agent
    whose owner was removed hard gets one again. The owner is kept by member id: a person
    who later takes a freed name owns nothing of the one before."""
    if (owner is None) == (not no_owner):
        raise click.UsageError("give --owner PERSON or --no-owner (one of them)")
    with hub_errors(as_json), client(hub, admin_token(admin_tok)) as c:
        m = c.set_owner(workspace, name, owner)
    emit(
        as_json,
        {"member": msgspec.to_builtins(m), "workspace": workspace},
        lambda: console.print(
            f"agent [bold]{m.name}[/bold] "
            + (f"is owned by [bold]{m.owner}[/bold]" if m.owner else "has no owner")
        ),
    )


@member.command("list")
@click.argument("workspace")
@_admin_options
@json_option
def member_list(workspace: str, hub: str, admin_tok: str | None, as_json: bool) -> None:
    """Every member of WORKSPACE, removed ones too (with their status)."""
    with hub_errors(as_json), client(hub, admin_token(admin_tok)) as c:
        found = c.list_members(workspace)
    emit(
        as_json,
        {"workspace": workspace, "members": msgspec.to_builtins(found)},
        lambda: table(
            ["name", "kind", "owner", "status", "id"],
            [[m.name, m.kind, m.owner, m.status, m.id] for m in found],
            "(no members)",
        ),
    )


@member.command("token")
@click.argument("workspace")
@click.argument("name")
@_admin_options
@json_option
def member_token(workspace: str, name: str, hub: str, admin_tok: str | None, as_json: bool) -> None:
    """Give member NAME a new token; the old one stops working at once."""
    with hub_errors(as_json), client(hub, admin_token(admin_tok)) as c:
        made = c.reissue_token(workspace, name)
    data = {"member": msgspec.to_builtins(made.member), "token": made.token}

    def human() -> None:
        table(["name", "kind", "token"], [[made.member.name, made.member.kind, made.token]])
        say("Keep the token: it is shown only once. The old one no longer works.")

    emit(as_json, data, human)


@workspace.command("retention")
@click.argument("name")
@click.option(
    "--events",
    default=None,
    help="Keep events this long: 30d, 12h, 90m, 45s or `forever` (the default).",
)
@click.option("--media", default=None, help="Keep files this long (same forms).")
@_admin_options
@json_option
def workspace_retention(
    name: str,
    events: str | None,
    media: str | None,
    hub: str,
    admin_tok: str | None,
    as_json: bool,
) -> None:
    """Show or set how long the rooms of workspace NAME keep their events and files, unless a
    room says otherwise (docs/operations.md "Retention")."""
    from agentpost.cli.room_ops import retention_lines

    change = retention_change(events, media, inherit=False)
    with hub_errors(as_json), client(hub, admin_token(admin_tok)) as c:
        kept = c.retention(workspace=name, **change)
    emit(as_json, {"retention": kept}, lambda: retention_lines(f"workspace {name}", kept))
