"""`agentpost search QUERY`: find events in the rooms you take part in, newest first
(docs/delivery.md)."""

from __future__ import annotations

import click

from agentpost.cli.app import main
from agentpost.cli.common import client, emit, hub_errors, hub_options, json_option, table
from agentpost.cli.inbox import room_names


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("words", nargs=-1, required=True, metavar="QUERY")
@click.option("--room", "room_ref", default=None, help="Only this room (an id, or a room name).")
@click.option("--sender", default=None, help="Only events this member sent.")
@click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True)
@click.option("--before", default=None, help="The next_before of a previous page.")
@hub_options
@json_option
def search(
    words: tuple[str, ...],
    room_ref: str | None,
    sender: str | None,
    limit: int,
    before: str | None,
    hub: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Search the rooms you take part in for QUERY: words (all must match), "a phrase",
    word* (a prefix), -word (not this word). The words may come as one argument or several
    (`agentpost search deploy -draft` is `agentpost search 'deploy -draft'`); `--` ends the
    options when a word would read as one."""
    options = [w for w in words if w.startswith("--")]
    if options:  # words are taken as they come (`-draft`), but `--x` is a mistyped option
        raise click.UsageError(
            f"No such option {options[0]!r} (a word to leave out is -word, one dash)"
        )
    query = " ".join(words)
    with hub_errors(as_json), client(hub, token) as c:
        room_id = c.resolve_room(room_ref) if room_ref is not None else None
        found = c.search(query, room=room_id, sender=sender, before=before, limit=limit)
        names = {} if as_json or not found["hits"] else room_names(c)
    hits = found["hits"]

    def human() -> None:
        table(
            ["event", "room", "sender", "created_at", "text"],
            [
                [
                    h["event"]["id"],
                    names.get(h["event"]["room"], h["event"]["room"]),
                    h["event"]["sender"],
                    h["event"]["created_at"],
                    h["event"]["text"],
                ]
                for h in hits
            ],
            "(no matches)",
        )
        if found["next_before"]:
            click.echo(f"more: --before {found['next_before']}")

    emit(as_json, found, human)
