"""`agentpost mcp`: the MCP server over stdio, acting as the member in AGENTPOST_TOKEN
(docs/mcp.md).

The token is read from a `--token-file` (env AGENTPOST_TOKEN_FILE; mode 0600, checked as in
cli/secrets.py) or env AGENTPOST_TOKEN, never a flag value, so it is not in `ps`; stdout
belongs to the MCP protocol, so everything else goes to stderr. A token file that cannot
be used does not stop the server: every tool call says what is wrong (a client that fails
to start its server only says "failed to connect").

This module imports neither the SDK nor the hub client: `mcp/front.py` answers the
handshake while `_loader` loads them in a thread (docs/mcp.md "Startup";
tests/mcp/test_mcp_startup.py fails if an import here becomes eager).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import click

from agentpost.cli.app import hub_option, main
from agentpost.cli.token_names import TOKEN_ENV, TOKEN_FILE_ENV, TOKEN_FILE_HELP
from agentpost.mcp import front

# The client a server that cannot be configured holds: never asked, as every call fails.
UNUSED_HUB = "http://127.0.0.1:9"

DEFAULT_MAX_FILE_BYTES = 25 * 1024 * 1024


def _loader(
    roots: tuple[Path, ...], hub: str, max_file_bytes: int, token_file: Path | None
) -> front.Handover:
    """Import the SDK and the hub client, read the token and make the Toolbox (in the
    front's loader thread); the handover serves the rest of the session."""
    import asyncio

    from agentpost.cli import secrets
    from agentpost.client import AsyncHubClient
    from agentpost.client.errors import NotConfigured
    from agentpost.connect.workspace import data_home
    from agentpost.egress import EgressRoots
    from agentpost.mcp.failures import ToolFailure, not_configured, token_refused
    from agentpost.mcp.server import serve_handover
    from agentpost.mcp.tools import Toolbox

    refused: ToolFailure | None = None
    try:
        token = secrets.member_token(os.environ.get(TOKEN_ENV), token_file)
    except secrets.SecretRefused as exc:
        click.echo(f"agentpost mcp: {exc.message}; every tool call will say so", err=True)
        token, refused = None, token_refused(exc.message)
    roots_ = EgressRoots(roots, max_file_bytes, never=[data_home()])
    try:
        client = AsyncHubClient(hub, token or "")
    except NotConfigured as exc:
        # The client already has its tools listed (the front answered): every call says
        # what is wrong instead of the server dying on the first one.
        click.echo(f"agentpost mcp: {exc.message}; every tool call will say so", err=True)
        client, refused = AsyncHubClient(UNUSED_HUB, ""), not_configured(exc.message)
    toolbox = Toolbox(client, roots_, refused=refused)

    def handover(
        replay: list[bytes],
        readline: Callable[[], bytes],
        write: Callable[[bytes], None],
        drop_id: str | None,
    ) -> None:
        asyncio.run(serve_handover(toolbox, replay, readline, write, drop_id))

    return handover


@main.command("mcp")
@click.option(
    "--allow-root",
    "roots",
    multiple=True,
    type=click.Path(exists=True, file_okay=False, dir_okay=True, path_type=Path),
    help="A directory upload_file may send files from (repeatable; none: no uploads).",
)
@hub_option
@click.option(
    "--max-file-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_FILE_BYTES,
    show_default=True,
    help="The largest file upload_file sends (the hub's own cap still applies).",
)
@click.option(
    "--token-file",
    envvar=TOKEN_FILE_ENV,
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help=TOKEN_FILE_HELP + " Default: env AGENTPOST_TOKEN.",
)
def mcp_cmd(
    roots: tuple[Path, ...], hub: str, max_file_bytes: int, token_file: Path | None
) -> None:
    """Serve MCP tools on stdin/stdout as the member whose token is in AGENTPOST_TOKEN."""
    logging.basicConfig(level=logging.WARNING, format="agentpost mcp: %(message)s")
    try:
        front.serve(lambda: _loader(roots, hub, max_file_bytes, token_file))
    except KeyboardInterrupt:
        pass
