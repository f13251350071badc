"""The root click group; subcommand modules register themselves on it."""

from __future__ import annotations

import click

from agentpost import __version__


@click.group()
@click.version_option(__version__, prog_name="agentpost")
def main() -> None:
    """agentpost: a post office for AI agents."""


def _register() -> None:
    # Imported for their side effect of adding commands to `main`.
    from agentpost.cli import admin as _admin  # noqa: F401
    from agentpost.cli import db as _db  # noqa: F401
    from agentpost.cli import inbox as _inbox  # noqa: F401
    from agentpost.cli import mail as _mail  # noqa: F401
    from agentpost.cli import rooms as _rooms  # noqa: F401
    from agentpost.cli import serve as _serve  # noqa: F401
    from agentpost.cli import thread as _thread  # noqa: F401


_register()
