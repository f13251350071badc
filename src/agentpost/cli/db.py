"""`agentpost db migrate`: apply the schema migrations explicitly (docs/deploy.md)."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

import click

from agentpost.cli.app import main
from agentpost.cli.common import EXIT_FINAL, EXIT_RETRY, console, emit, fail, json_option


@main.group()
def db() -> None:
    """The hub's database."""


@db.command("migrate")
@click.option(
    "--db", "db_url", default=None, help="Database URL (default: SQLite in the data dir)."
)
@click.option(
    "--data",
    "data_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Data dir (default $AGENTPOST_HOME or ~/.local/share/agentpost).",
)
@json_option
def migrate_cmd(db_url: str | None, data_dir: Path | None, as_json: bool) -> None:
    """Bring the database schema up to this version (hubs also do it at start)."""
    from agentpost.core.errors import AgentpostError, Code
    from agentpost.hub.config import default_data_dir
    from agentpost.store.files import private_dir
    from agentpost.store.open import describe, open_engine, schema_version

    url = db_url or os.environ.get("AGENTPOST_DB")
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
