"""`agentpost edit`, `react`, `redact`: relations to an event (docs/cli.md, docs/api.md
"Relations"). Each is keyed like `post` (`-k`), and answers the relation event."""

from __future__ import annotations

import click
import msgspec

from agentpost.cli.app import main
from agentpost.cli.common import client, emit, hub_errors, hub_options, json_option, say
from agentpost.client import PostResult

KEY_HELP = "Send again with the same key after a failure: done at most once."


def _report(as_json: bool, res: PostResult, done: str) -> None:
    def human() -> None:
        ev = res.event
        if res.idempotency_status == "replayed":
            say(f"replayed {ev.id} seq {ev.seq}: done before with this key; nothing new")
            return
        say(f"{done} {ev.relates_to} ({ev.type} {ev.id} seq {ev.seq})")

    emit(as_json, msgspec.to_builtins(res), human)


@main.command()
@click.argument("room_ref", metavar="ROOM")
@click.argument("event_id", metavar="EVENT")
@click.option("--text", "-t", required=True, help="The new text (a media event: its caption).")
@click.option("--idempotency-key", "-k", default=None, help=KEY_HELP)
@hub_options
@json_option
def edit(
    room_ref: str,
    event_id: str,
    text: str,
    idempotency_key: str | None,
    hub: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Replace the text of your message EVENT in ROOM; reads show it edited."""
    with hub_errors(as_json), client(hub, token) as c:
        res = c.edit(c.resolve_room(room_ref), event_id, text, key=idempotency_key)
    _report(as_json, res, "edited")


@main.command()
@click.argument("room_ref", metavar="ROOM")
@click.argument("event_id", metavar="EVENT")
@click.argument("emoji")
@click.option("--remove", is_flag=True, help="Take your reaction with EMOJI back.")
@click.option("--idempotency-key", "-k", default=None, help=KEY_HELP)
@hub_options
@json_option
def react(
    room_ref: str,
    event_id: str,
    emoji: str,
    remove: bool,
    idempotency_key: str | None,
    hub: str,
    token: str | None,
    as_json: bool,
) -> None:
    """React to EVENT in ROOM with EMOJI (one emoji or short string, no spaces)."""
    with hub_errors(as_json), client(hub, token) as c:
        res = c.react(c.resolve_room(room_ref), event_id, emoji, remove=remove, key=idempotency_key)
    _report(as_json, res, f"took {emoji} back from" if remove else f"reacted {emoji} to")


@main.command()
@click.argument("room_ref", metavar="ROOM")
@click.argument("event_id", metavar="EVENT")
@click.option("--reason", default=None, help="Why (kept with the redaction event).")
@click.option("--idempotency-key", "-k", default=None, help=KEY_HELP)
@hub_options
@json_option
def redact(
    room_ref: str,
    event_id: str,
    reason: str | None,
    idempotency_key: str | None,
    hub: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Hide the text and files of EVENT in ROOM for good; the event stays, marked redacted."""
    with hub_errors(as_json), client(hub, token) as c:
        res = c.redact(c.resolve_room(room_ref), event_id, reason, key=idempotency_key)
    _report(as_json, res, "redacted")
