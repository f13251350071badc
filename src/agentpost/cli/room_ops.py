"""`agentpost room list|archive|unarchive|add|remove`, `whoami`, `media get`: what a member
does beyond posting and reading."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click
import msgspec

from agentpost.cli.app import main
from agentpost.cli.common import (
    EXIT_FINAL,
    client,
    duration_text,
    emit,
    fail,
    hub_errors,
    hub_options,
    json_option,
    retention_change,
    say,
    table,
)
from agentpost.cli.rooms import room
from agentpost.client import HubClient, HubRefused, Room


def own_workspace(c: HubClient, workspace: str | None) -> str:
    """`--workspace`, or the workspace of the caller's token."""
    return workspace if workspace else str(c.me()["workspace"]["name"])


def _room_row(r: Room) -> list[object]:
    return [r.id, r.name, r.kind, r.mode, r.archived, ", ".join(r.participants)]


ROOM_COLUMNS = ["id", "name", "kind", "mode", "archived", "participants"]


@room.command("list")
@click.option("--workspace", "-w", default=None, help="Workspace name (default: your token's).")
@hub_options
@json_option
def room_list(workspace: str | None, hub: str, token: str | None, as_json: bool) -> None:
    """The rooms of the workspace that you take part in."""
    with hub_errors(as_json), client(hub, token) as c:
        found = c.rooms(own_workspace(c, workspace))
    emit(
        as_json,
        {"rooms": msgspec.to_builtins(found)},
        lambda: table(ROOM_COLUMNS, [_room_row(r) for r in found], empty="(no rooms)"),
    )


def _archive_command(archived: bool) -> click.Command:
    @click.argument("room_ref", metavar="ROOM")
    @hub_options
    @json_option
    def command(room_ref: str, hub: str, token: str | None, as_json: bool) -> None:
        with hub_errors(as_json), client(hub, token) as c:
            r = c.set_archived(c.resolve_room(room_ref), archived)
        emit(
            as_json,
            {"room": msgspec.to_builtins(r)},
            lambda: say(f"{r.name} ({r.id}) {'archived' if r.archived else 'unarchived'}"),
        )

    verb = "archive" if archived else "unarchive"
    command.__doc__ = (
        "Archive ROOM: nothing more can be posted; its events stay."
        if archived
        else "Unarchive ROOM: posting works again."
    )
    return room.command(verb)(command)


room_archive = _archive_command(True)
room_unarchive = _archive_command(False)


def _participant_command(present: bool) -> click.Command:
    @click.argument("room_ref", metavar="ROOM")
    @click.argument("name")
    @hub_options
    @json_option
    def command(room_ref: str, name: str, hub: str, token: str | None, as_json: bool) -> None:
        me: str | None = None
        with hub_errors(as_json), client(hub, token) as c:
            r = c.set_participant(c.resolve_room(room_ref), name, present)
            if not present and not as_json:
                me = _my_name(c)
        emit(
            as_json,
            {"room": msgspec.to_builtins(r)},
            lambda: say(_participants_said(r, name, present, me)),
        )

    command.__doc__ = "Add member NAME to ROOM." if present else "Take member NAME out of ROOM."
    return room.command("add" if present else "remove")(command)


def _my_name(c: HubClient) -> str | None:
    """The caller's member name; None for the admin token, which is no member."""
    try:
        return str(c.me()["member"]["name"])
    except HubRefused:
        return None


def _participants_said(r: Room, name: str, added: bool, me: str | None) -> str:
    """Who is in the room now, and what a removal did that a person would not guess: that
    the room left their `room list`, or that nobody is left in it (docs/cli.md "Rooms")."""
    now = ", ".join(r.participants)
    if added:
        return f"{r.name} ({r.id}): {now}"
    if not r.participants:
        return (
            f"took {name} out of {r.name} ({r.id}): no participants are left. The room and its "
            "events are kept, but it is in nobody's `room list` now; the admin can add members "
            f"back (`agentpost room add {r.id} NAME` with the admin token)"
        )
    if name == me:
        return (
            f"you left {r.name} ({r.id}): it is no longer in your `room list`; still in it: {now}"
        )
    return f"took {name} out of {r.name} ({r.id}); still in it: {now}"


def retention_lines(who: str, kept: dict[str, object]) -> None:
    eff = kept["effective"]
    assert isinstance(eff, dict)
    own = {k: kept[k] for k in ("events_seconds", "media_seconds")}
    for what, key in (("events", "events_seconds"), ("files", "media_seconds")):
        if own[key] is not None:
            how = "set here"
        else:
            how = "as its workspace" if who.startswith("room") else "not set"
        say(f"{who} keeps {what} {duration_text(eff[key])} ({how})")


@room.command("retention")
@click.argument("room_ref", metavar="ROOM")
@click.option(
    "--events",
    default=None,
    help="Keep events this long: 30d, 12h, 90m, 45s, `forever` or `inherit` (as the workspace).",
)
@click.option("--media", default=None, help="Keep files this long (same forms).")
@hub_options
@json_option
def room_retention(
    room_ref: str,
    events: str | None,
    media: str | None,
    hub: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Show or set how long ROOM keeps its events and files (docs/operations.md); older ones
    become tombstones, their files gone. A human participant sets a day or more, never longer
    than the workspace keeps; the admin anything."""
    change = retention_change(events, media, inherit=True)
    with hub_errors(as_json), client(hub, token) as c:
        room_id = c.resolve_room(room_ref)
        kept = c.retention(room_id=room_id, **change)
    emit(as_json, {"retention": kept}, lambda: retention_lines(f"room {room_ref}", kept))


room_add = _participant_command(True)
room_remove = _participant_command(False)


@main.command()
@hub_options
@json_option
def whoami(hub: str, token: str | None, as_json: bool) -> None:
    """Who your token is: member, kind, owner, workspace, inbox cursor."""
    with hub_errors(as_json), client(hub, token) as c:
        me = c.me()
    m = me["member"]
    emit(
        as_json,
        me,
        lambda: table(
            ["name", "kind", "owner", "workspace", "inbox cursor", "id"],
            [
                [
                    m["name"],
                    m["kind"],
                    m.get("owner"),
                    me["workspace"]["name"],
                    me.get("inbox_cursor"),
                    m["id"],
                ]
            ],
        ),
    )


@main.group()
def media() -> None:
    """Files posted into rooms."""


@media.command("get")
@click.argument("media_id", metavar="MEDIA")
@click.option(
    "--output",
    "-o",
    default=None,
    help="Where to write it (default: its name, in this dir; - for stdout).",
)
@click.option("--force", is_flag=True, help="Overwrite a file that exists.")
@hub_options
@json_option
def media_get(
    media_id: str, output: str | None, force: bool, hub: str, token: str | None, as_json: bool
) -> None:
    """Download MEDIA (an attachment's id, `md_…`), its sha256 checked."""
    if output == "-":
        with hub_errors(as_json), client(hub, token) as c:
            c.fetch_media(media_id, sys.stdout.buffer)
        return
    with hub_errors(as_json), client(hub, token) as c:
        part = Path(f".agentpost-download-{os.getpid()}.part")
        if output is not None:
            part = Path(output).parent / part
        try:
            with open(part, "xb") as sink:
                got = c.fetch_media(media_id, sink)
            dest = Path(output) if output is not None else Path(got.name)
            if dest.exists() and not force:
                fail(
                    as_json,
                    "file_exists",
                    f"{dest} exists; nothing was written (--force overwrites, -o picks another)",
                    False,
                    EXIT_FINAL,
                )
            os.replace(part, dest)
        except OSError as exc:
            fail(as_json, "cannot_write", f"{exc.filename}: {exc.strerror}", False, EXIT_FINAL)
        finally:
            part.unlink(missing_ok=True)
    emit(
        as_json,
        {"path": str(dest), **msgspec.to_builtins(got)},
        lambda: say(f"wrote {dest} ({got.size} bytes, sha256 {got.sha256})"),
    )
