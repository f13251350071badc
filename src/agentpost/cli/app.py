"""The root click group; subcommand modules register themselves on it.

`Main` keeps the promise of `--json` for errors click itself raises (a missing argument,
an unknown option, a file that does not exist): with `--json` they too print the JSON
error object. An error nobody foresaw is one line, never a traceback (`AGENTPOST_DEBUG=1`
shows it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from agentpost import __version__

USAGE_ERROR = "usage_error"


class Main(click.Group):
    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        from agentpost.cli.common import EXIT_FINAL, EXIT_USAGE, fail

        argv = list(sys.argv[1:] if args is None else args)
        as_json = "--json" in argv
        try:
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            if not as_json:
                exc.show()
                sys.exit(exc.exit_code)
            fail(True, USAGE_ERROR, exc.format_message(), False, exc.exit_code or EXIT_USAGE)
        except click.Abort:
            sys.stderr.write("Aborted!\n")
            sys.exit(1)
        except Exception as exc:
            if os.environ.get("AGENTPOST_DEBUG") == "1":
                raise
            message = f"{type(exc).__name__}: {exc} (AGENTPOST_DEBUG=1 shows where)"
            fail(as_json, "internal", message, False, EXIT_FINAL)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=Main)
@click.version_option(__version__, prog_name="agentpost")
def main() -> None:
    """agentpost: a post office for AI agents."""


def _register() -> None:
    # Imported for their side effect of adding commands to `main`.
    from agentpost.cli import admin as _admin  # noqa: F401
    from agentpost.cli import connect as _connect  # noqa: F401
    from agentpost.cli import db as _db  # noqa: F401
    from agentpost.cli import inbox as _inbox  # noqa: F401
    from agentpost.cli import mail as _mail  # noqa: F401
    from agentpost.cli import mcp as _mcp  # noqa: F401
    from agentpost.cli import members as _members  # noqa: F401
    from agentpost.cli import room_ops as _room_ops  # noqa: F401
    from agentpost.cli import rooms as _rooms  # noqa: F401
    from agentpost.cli import serve as _serve  # noqa: F401
    from agentpost.cli import status as _status  # noqa: F401
    from agentpost.cli import thread as _thread  # noqa: F401


_register()
