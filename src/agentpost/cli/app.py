"""The root click group; subcommand modules register themselves on it.

`Main` keeps the promise of `--json` for errors click itself raises (a missing argument,
an unknown option, a file that does not exist): with `--json` they too print the JSON
error object. An error nobody foresaw is one line, never a traceback (`AGENTPOST_DEBUG=1`
shows it).
"""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import click

from agentpost import __version__

USAGE_ERROR = "usage_error"

# The modules that make each command (a module adds its commands to `main` when it is
# imported). Only the modules of the command a command line names are imported, so `agentpost
# post` loads neither mail nor the hub, and every CLI call and hub start is that much faster.
# A group names every module that adds a subcommand to it (tests/unit/test_cli_lazy.py).
COMMANDS: dict[str, tuple[str, ...]] = {
    "admin": ("admin", "export"),
    "capabilities": ("rooms",),
    "connect": ("connect",),
    "db": ("db",),
    "edit": ("relations",),
    "guard": ("reserve",),
    "inbox": ("inbox", "inbox_hook"),
    "mail": ("mail",),
    "mcp": ("mcp",),
    "members": ("members",),
    "media": ("room_ops",),
    "post": ("rooms",),
    "react": ("relations",),
    "redact": ("relations",),
    "release": ("reserve",),
    "reservations": ("reserve",),
    "reserve": ("reserve",),
    "room": ("rooms", "room_ops", "inbox", "export"),
    "search": ("search",),
    "serve": ("serve",),
    "status": ("status",),
    "tail": ("rooms",),
    "thread": ("thread",),
    "whoami": ("room_ops",),
}


F = TypeVar("F", bound=Callable[..., Any])


def hub_option(f: F) -> F:
    """`--hub` (env AGENTPOST_HUB): one spelling for every command that talks to a hub.
    Here, not in cli/common.py, so `agentpost mcp` starts without common's imports."""
    return click.option(
        "--hub",
        envvar="AGENTPOST_HUB",
        default="http://127.0.0.1:8470",
        show_default=True,
        help="Hub URL (env AGENTPOST_HUB).",
    )(f)


class Main(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """An unknown command names the nearest one (`psot` → `post`)."""
        name = args[0] if args else ""
        if name and not name.startswith("-") and self.get_command(ctx, name) is None:
            near = difflib.get_close_matches(name, self.list_commands(ctx), n=1, cutoff=0.6)
            hint = f" Did you mean {near[0]!r}?" if near else ""
            raise click.UsageError(f"No such command {name!r}.{hint}", ctx)
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        for module in COMMANDS.get(cmd_name, ()):
            importlib.import_module(f"agentpost.cli.{module}")
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            # The reader closed the pipe (`agentpost tail ROOM | head -1`): caught here,
            # before click's own handler makes it exit 1 (docs/cli.md "The contract", rule 7).
            reader_left()

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        as_json = "--json" in argv
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
            # Written now, not by Python's flush at exit, so a reader that left early
            # (`| head -1`) ends here quietly (docs/cli.md "The contract", rule 7).
            sys.stdout.flush()
        except click.ClickException as exc:
            from agentpost.cli.failing import EXIT_USAGE, fail

            fail(as_json, USAGE_ERROR, usage_message(exc), False, exc.exit_code or EXIT_USAGE)
        except click.Abort:
            sys.stderr.write("Aborted!\n")
            sys.exit(1)
        except BrokenPipeError:  # the flush above: the reader left after the last write
            reader_left()
        except Exception as exc:
            if os.environ.get("AGENTPOST_DEBUG") == "1":
                raise
            from agentpost.cli.failing import EXIT_FINAL, fail

            message = f"{type(exc).__name__}: {exc} (AGENTPOST_DEBUG=1 shows where)"
            fail(as_json, "internal", message, False, EXIT_FINAL)
        sys.exit(rv if isinstance(rv, int) else 0)


def reader_left() -> NoReturn:
    """The reader closed the pipe (`| head -1`): it has what it wanted, so the command ends
    quietly with 0, and Python's flush at exit goes nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


def usage_message(exc: click.ClickException) -> str:
    """Click's complaint as one line that says where help is (`agentpost post --help`)."""
    message = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    if ctx is not None and ctx.command_path:
        message += f" (`{ctx.command_path} --help` lists the options)"
    return message


@click.group(cls=Main)
@click.version_option(__version__, prog_name="agentpost")
def main() -> None:
    """agentpost: a post office for AI agents."""
