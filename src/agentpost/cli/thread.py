"""`agentpost thread ensure|archive|unarchive|send` (docs/threads.md).

A thin layer over the client's thread calls: it reads the message, prints the JSON of
docs/threads.md and exits 0, 1 (final), 3 (hub unreachable) or 75 (retry later) through
`common.hub_errors`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import msgspec

from agentpost.cli.app import main
from agentpost.cli.common import (
    EXIT_FINAL,
    client,
    console,
    emit,
    fail,
    hub_errors,
    hub_options,
    json_option,
)
from agentpost.client.threads import INVALID_REQUEST

# What this CLI can do beyond the hub, for `agentpost capabilities --json` (docs/threads.md).
CLI_CAPABILITIES = {
    "thread_send_idempotency": True,
    "thread_send_outcome": True,
    "thread_ensure": True,
}


@main.group()
def thread() -> None:
    """Threads: one conversation per owner, and sends that happen once."""


@thread.command("ensure")
@click.argument("name")
@click.option("--workspace", "-w", default=None, help="Workspace name (default: your token's).")
@click.option("--owner", default=None, help="The thread's owner (default: you).")
@hub_options
@json_option
def thread_ensure(
    name: str, workspace: str | None, owner: str | None, hub: str, token: str | None, as_json: bool
) -> None:
    """Make or find the thread NAME of OWNER; an archived one comes back unarchived."""
    with hub_errors(as_json), client(hub, token) as c:
        t = c.ensure_thread(workspace or str(c.me()["workspace"]["name"]), name, owner)
    verb = "made" if t.created else "found"
    emit(
        as_json,
        msgspec.to_builtins(t),
        lambda: console.print(f"{verb} thread {t.name} of {t.owner}: {t.thread_id}"),
    )


def _archive_command(archived: bool) -> click.Command:
    @click.argument("thread_ref", metavar="THREAD")
    @hub_options
    @json_option
    def command(thread_ref: str, hub: str, token: str | None, as_json: bool) -> None:
        with hub_errors(as_json), client(hub, token) as c:
            room = c.archive_thread(thread_ref) if archived else c.unarchive_thread(thread_ref)
        emit(
            as_json,
            {"thread_id": room.id, "name": room.name, "archived": room.archived},
            lambda: console.print(
                f"{room.name} ({room.id}) {'archived' if room.archived else 'unarchived'}",
                markup=False,
                highlight=False,
            ),
        )

    verb = "archive" if archived else "unarchive"
    command.__doc__ = f"{verb.capitalize()} THREAD (its id, or its name)."
    return thread.command(verb)(command)


thread_archive = _archive_command(True)
thread_unarchive = _archive_command(False)


def _read_message(as_json: bool, text: str | None, message_file: str | None) -> str:
    # Missing or given twice is a command line that does not parse, as for `post`
    # (docs/cli.md "The contract", rule 4).
    if text is not None and message_file is not None:
        raise click.UsageError("give one of --text/-t or --file/-f, not both")
    if message_file is None and not (text or "").strip():
        raise click.UsageError("nothing to send: give --text TEXT, or --file FILE (- for stdin)")
    if text is not None:
        return text
    assert message_file is not None
    try:
        raw = sys.stdin.buffer.read() if message_file == "-" else Path(message_file).read_bytes()
        return raw.decode("utf-8")
    except OSError as exc:
        why = exc.strerror or str(exc)
        fail(as_json, INVALID_REQUEST, f"cannot read {message_file}: {why}", False, EXIT_FINAL)
    except UnicodeDecodeError:
        fail(as_json, INVALID_REQUEST, f"{message_file} is not UTF-8 text", False, EXIT_FINAL)
    raise AssertionError("fail() exits")


@thread.command("send")
@click.argument("thread_ref", metavar="THREAD")
@click.option(
    "--idempotency-key",
    "-k",
    default=None,
    help="Run the same command again after a crash: the message is sent at most once.",
)
@click.option(
    "--file",
    "-f",
    "--message-file",
    "message_file",
    default=None,
    help="Read the message from PATH, or - (stdin).",
)
@click.option("--text", "-t", default=None, help="The message.")
@hub_options
@json_option
def thread_send(
    thread_ref: str,
    idempotency_key: str | None,
    message_file: str | None,
    text: str | None,
    hub: str,
    token: str | None,
    as_json: bool,
) -> None:
    """Send a message to THREAD; with a key, once, however often the command runs."""
    message = _read_message(as_json, text, message_file)
    with hub_errors(as_json), client(hub, token) as c:
        res = c.thread_send(thread_ref, message, key=idempotency_key)
    emit(
        as_json,
        msgspec.to_builtins(res),
        lambda: console.print(
            f"{res.delivery} {res.message_id} in {res.thread_id} (command {res.command_id})"
        ),
    )
