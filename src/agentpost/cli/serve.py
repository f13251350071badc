"""`agentpost serve` (docs/api.md Starting)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agentpost.cli import secrets
from agentpost.cli.app import main
from agentpost.hub.config import HubConfig, default_data_dir, public_url_problem


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8470,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="0 picks a free port.",
)
@click.option(
    "--data",
    "data_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Data dir (default $AGENTPOST_HOME or ~/.local/share/agentpost).",
)
@click.option(
    "--db",
    "db_url",
    default=None,
    help="Database URL (default: env AGENTPOST_DB, else SQLite in the data dir). Every local "
    "user can read it in the process list: give a password by env or file, not here.",
)
@click.option(
    "--db-password-file",
    envvar=secrets.DB_PASSWORD_FILE_ENV,
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the PostgreSQL password from this file (mode 0600, yours; env "
    "AGENTPOST_DB_PASSWORD_FILE). PGPASSWORD and ~/.pgpass work too.",
)
@click.option(
    "--blobs",
    "blobs_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Media dir (default DATA/blobs); hub processes sharing a database share this too.",
)
@click.option("--max-upload-bytes", type=int, default=25 * 1024 * 1024, show_default=True)
@click.option(
    "--key-ttl-seconds",
    type=click.IntRange(min=1),
    default=86400,
    show_default=True,
    help="How long an Idempotency-Key is remembered.",
)
@click.option(
    "--public-url",
    envvar="AGENTPOST_PUBLIC_URL",
    default=None,
    help="The URL clients reach the hub at (a proxy's, e.g. https://hub.example); every URL "
    "the hub writes (agent cards, push and media links) starts with it (env "
    "AGENTPOST_PUBLIC_URL; default the address it listens on, never a request's Host).",
)
@click.option(
    "--log-level",
    default="warning",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"]),
)
def serve(
    host: str,
    port: int,
    data_dir: Path | None,
    db_url: str | None,
    db_password_file: Path | None,
    blobs_dir: Path | None,
    max_upload_bytes: int,
    key_ttl_seconds: int,
    public_url: str | None,
    log_level: str,
) -> None:
    """Run the hub."""
    from agentpost.hub.serve import serve as run

    if public_url is not None and (why := public_url_problem(public_url)):
        from agentpost.cli.common import EXIT_USAGE

        click.echo(f"agentpost serve: --public-url {public_url!r}: {why}", err=True)
        sys.exit(EXIT_USAGE)

    try:
        url = secrets.db_url(db_url, db_password_file)
    except secrets.SecretRefused as exc:
        from agentpost.cli.common import EXIT_FINAL

        click.echo(f"agentpost serve: {exc.message}", err=True)
        sys.exit(EXIT_FINAL)
    config = HubConfig(
        data_dir=data_dir or default_data_dir(),
        db_url=url,
        host=host,
        port=port,
        max_upload_bytes=max_upload_bytes,
        key_ttl_seconds=key_ttl_seconds,
        blobs_dir=blobs_dir,
        public_url=public_url or "",
    )
    run(config, log_level)
