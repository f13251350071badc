"""`agentpost mcp`: the MCP server over stdio, acting as the member in AGENTPOST_TOKEN (§11).

The token is read from a `--token-file` (env AGENTPOST_TOKEN_FILE; mode 0600, checked as in
cli/secrets.py) or env AGENTPOST_TOKEN, never a flag value, so it is not in `ps`; stdout
belongs to the MCP protocol, so everything else goes to stderr.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

import click

from agentpost.cli import secrets
from agentpost.cli.app import main

DEFAULT_MAX_FILE_BYTES = 25 * 1024 * 1024


@main.command("mcp")
@click.option(
    "--allow-root",
    "roots",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, dir_okay=True, path_type=Path),
    help="A directory upload_file may send files from (repeatable; none: no uploads).",
)
@click.option(
    "--hub",
    envvar="AGENTPOST_HUB",
    default="http://127.0.0.1:8470",
    show_default=True,
    help="Hub URL (env AGENTPOST_HUB).",
)
@click.option(
    "--max-file-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_FILE_BYTES,
    show_default=True,
    help="The largest file upload_file sends (the hub's own cap still applies).",
)
@click.option(
    "--token-file",
    envvar=secrets.TOKEN_FILE_ENV,
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=secrets.TOKEN_FILE_HELP + " Default: env AGENTPOST_TOKEN.",
)
def mcp_cmd(
    roots: tuple[Path, ...], hub: str, max_file_bytes: int, token_file: Path | None
) -> None:
    """Serve MCP tools on stdin/stdout as the member whose token is in AGENTPOST_TOKEN."""
    from agentpost.client import AsyncHubClient
    from agentpost.connect.workspace import data_home
    from agentpost.egress import EgressRoots
    from agentpost.mcp.server import serve_stdio
    from agentpost.mcp.tools import Toolbox

    logging.basicConfig(level=logging.WARNING, format="agentpost mcp: %(message)s")
    try:
        token = secrets.member_token(os.environ.get(secrets.TOKEN_ENV), token_file)
    except secrets.SecretRefused as exc:
        from agentpost.cli.common import EXIT_FINAL

        click.echo(f"agentpost mcp: {exc.message}", err=True)
        sys.exit(EXIT_FINAL)
    toolbox = Toolbox(AsyncHubClient(hub, token or ""), EgressRoots(roots, max_file_bytes, never=[data_home()]))
    try:
        asyncio.run(serve_stdio(toolbox))
    except KeyboardInterrupt:
        pass
