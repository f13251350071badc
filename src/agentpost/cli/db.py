"""`agentpost db migrate`: apply the schema migrations explicitly (docs/deploy.md)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import click

from agentpost.cli import secrets
from agentpost.cli.app import main
from agentpost.cli.common import EXIT_FINAL, EXIT_RETRY, console, emit, fail, json_option


@main.group()
def db() -> None:
    """The hub's database."""


@db.command("migrate")
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
    "--data",
    "data_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Data dir (default $AGENTPOST_HOME or ~/.local/share/agentpost).",
)
@json_option
def migrate_cmd(
    db_url: str | None, db_password_file: Path | None, data_dir: Path | None, as_json: bool
) -> None:
    """Bring the database schema up to this version (hubs also do it at start)."""
    from agentpost.core.errors import AgentpostError, Code
    from agentpost.hub.config import default_data_dir
    from agentpost.store.files import private_dir
    from agentpost.store.open import describe, open_engine, schema_version

    try:
        url = secrets.db_url(db_url, db_password_file)
    except secrets.SecretRefused as exc:
        fail(as_json, exc.code, exc.message, False, EXIT_FINAL)
    data = data_dir or default_data_dir()

    async def run() -> int:
        if url is None:
            private_dir(data)
        engine = open_engine(url, data)
        try:
            return await engine.read(schema_version)
        finally:
            await engine.close()

    try:
        version = asyncio.run(run())
    except AgentpostError as exc:
        retryable = exc.code is Code.STORAGE_UNAVAILABLE
        fail(
            as_json, str(exc.code), exc.message, retryable, EXIT_RETRY if retryable else EXIT_FINAL
        )
        return
    except (OSError, sqlite3.Error) as exc:
        fail(as_json, "storage_unavailable", f"{describe(url, data)}: {exc}", False, EXIT_FINAL)
        return
    emit(
        as_json,
        {"schema_version": version, "database": describe(url, data)},
        lambda: console.print(f"schema of {describe(url, data)} is at version {version}"),
    )
