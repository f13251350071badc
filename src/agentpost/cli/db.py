"""`agentpost db …`: the hub's database, for the person who runs it (docs/deploy.md,
docs/operations.md): migrate, backup, restore, verify."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from agentpost.cli import secrets
from agentpost.cli.app import main
from agentpost.cli.common import EXIT_FINAL, EXIT_RETRY, console, emit, fail, json_option

F = TypeVar("F", bound=Callable[..., Any])


@main.group()
def db() -> None:
    """The hub's database."""


def _where(fn: F) -> F:
    """--db, --db-password-file, --data and --blobs: where a hub keeps its data."""
    return _db_where(_BLOBS(fn))


def _db_where(fn: F) -> F:
    """--db, --db-password-file and --data: where a hub keeps its database."""
    for option in reversed(
        [
            click.option(
                "--db",
                "db_url",
                default=None,
                help="Database URL (default: env AGENTPOST_DB, else SQLite in the data dir). "
                "Every local user can read it in the process list: give a password by env or "
                "file, not here.",
            ),
            click.option(
                "--db-password-file",
                envvar=secrets.DB_PASSWORD_FILE_ENV,
                type=click.Path(dir_okay=False, path_type=Path),
                default=None,
                help="Read the PostgreSQL password from this file (mode 0600, yours; env "
                "AGENTPOST_DB_PASSWORD_FILE). PGPASSWORD and ~/.pgpass work too.",
            ),
            click.option(
                "--data",
                "data_dir",
                type=click.Path(path_type=Path),
                default=None,
                help="Data dir (default $AGENTPOST_HOME or ~/.local/share/agentpost).",
            ),
        ]
    ):
        fn = option(fn)
    return fn


_BLOBS = click.option(
    "--blobs",
    "blobs_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Media dir, as the hub's --blobs (default DATA/blobs).",
)


def _store(
    db_url: str | None,
    db_password_file: Path | None,
    data_dir: Path | None,
    blobs_dir: Path | None,
    as_json: bool,
) -> Any:
    from agentpost.hub.config import default_data_dir
    from agentpost.store.backup import Store

    try:
        url = secrets.db_url(db_url, db_password_file)
    except secrets.SecretRefused as exc:
        fail(as_json, exc.code, exc.message, False, EXIT_FINAL)
    if url is not None and not url.startswith(("sqlite:///", "postgresql://", "postgres://")):
        fail(
            as_json,
            "invalid_request",
            f"unsupported database URL '{url.partition(':')[0]}:…' "
            "(expected sqlite:///PATH or postgresql://…)",
            False,
            EXIT_FINAL,
        )
    data = data_dir or default_data_dir()
    return Store(url, data, blobs_dir or data / "blobs")


def _failed(as_json: bool, exc: Exception) -> NoReturn:
    from agentpost.core.errors import AgentpostError, Code

    if isinstance(exc, AgentpostError):
        retryable = exc.code in (Code.STORAGE_UNAVAILABLE, Code.BUSY)
        fail(
            as_json, str(exc.code), exc.message, retryable, EXIT_RETRY if retryable else EXIT_FINAL
        )
    fail(as_json, "storage_unavailable", str(exc), False, EXIT_FINAL)


@db.command("backup")
@click.argument("dest", type=click.Path(path_type=Path))
@_where
@json_option
def backup_cmd(
    dest: Path,
    db_url: str | None,
    db_password_file: Path | None,
    data_dir: Path | None,
    blobs_dir: Path | None,
    as_json: bool,
) -> None:
    """Back up a hub, while it serves, into the new directory DEST: a consistent copy of the
    database (SQLite's online backup; pg_dump on PostgreSQL) and every file its media name."""
    from agentpost.core.errors import AgentpostError
    from agentpost.store import backup

    store = _store(db_url, db_password_file, data_dir, blobs_dir, as_json)
    try:
        manifest = backup.backup(store, dest)
    except (AgentpostError, OSError, sqlite3.Error) as exc:
        _failed(as_json, exc)
    problems = manifest["problems"]
    counts = manifest["counts"]

    def human() -> None:
        console.print(
            f"backed up {store.engine} schema {manifest['schema_version']}: "
            f"{counts['events']} events in {counts['rooms']} rooms, {manifest['blobs']} files "
            f"({manifest['blob_bytes']} bytes) into {dest}"
        )
        for p in problems:
            console.print(f"[red]problem[/red]: {p}", highlight=False)

    if not (problems and as_json):  # JSON: one object, the error below when there are problems
        emit(as_json, {"backup": str(dest), **manifest}, human)
    if problems:
        fail(
            as_json,
            "backup_incomplete",
            f"{len(problems)} media files were missing or damaged in the hub's own store; the "
            f"backup holds everything else (listed in {dest / backup.MANIFEST})",
            False,
            EXIT_FINAL,
        )


@db.command("restore")
@click.argument("src", type=click.Path(path_type=Path, exists=True, file_okay=False))
@_where
@click.option(
    "--force",
    is_flag=True,
    help="Restore a backup that fails its checks all the same (what failed is listed).",
)
@json_option
def restore_cmd(
    src: Path,
    db_url: str | None,
    db_password_file: Path | None,
    data_dir: Path | None,
    blobs_dir: Path | None,
    force: bool,
    as_json: bool,
) -> None:
    """Restore the backup SRC into a new or empty data dir (SQLite) or an empty database
    (PostgreSQL, with --db). The backup is checked first as `db verify` checks a data home
    (each file's sha256, its rows, the manifest's counts); nothing is changed if it fails
    (backup_invalid, exit 1), unless --force."""
    from agentpost.core.errors import AgentpostError
    from agentpost.store import backup

    store = _store(db_url, db_password_file, data_dir, blobs_dir, as_json)
    if store.engine == "sqlite" and data_dir is None:
        fail(
            as_json,
            "invalid_request",
            "name the new data dir with --data DIR (restore never writes over a data dir)",
            False,
            EXIT_FINAL,
        )
    try:
        manifest = backup.restore(src, store, force=force)
    except (AgentpostError, OSError, sqlite3.Error) as exc:
        _failed(as_json, exc)
    counts = manifest["counts"]
    where = store.data_dir if store.engine == "sqlite" else "the database"

    def human() -> None:
        for p in manifest.get("problems_forced", []):
            console.print(f"[red]forced past[/red] {p['check']}: {p['message']}", highlight=False)
        console.print(
            f"restored {counts['events']} events in {counts['rooms']} rooms and "
            f"{manifest['blobs']} files into {where}; start a hub on it"
        )

    emit(as_json, {"restored": str(src), **manifest}, human)


@db.command("verify")
@_where
@click.option(
    "--quick",
    is_flag=True,
    help="Check that each media file is there and of its size, without hashing it.",
)
@json_option
def verify_cmd(
    db_url: str | None,
    db_password_file: Path | None,
    data_dir: Path | None,
    blobs_dir: Path | None,
    quick: bool,
    as_json: bool,
) -> None:
    """Check a data home (or a backup directory, with --data) and say what is wrong;
    changes nothing. Exit 1 when something is."""
    from agentpost.core.errors import AgentpostError
    from agentpost.store.verify import verify

    store = _store(db_url, db_password_file, data_dir, blobs_dir, as_json)
    try:
        report = verify(store, hash_blobs=not quick)
    except (AgentpostError, OSError, sqlite3.Error) as exc:
        _failed(as_json, exc)

    def human() -> None:
        c = report.counts
        for p in report.problems:
            console.print(f"[red]problem[/red] {p['check']}: {p['message']}", highlight=False)
        for n in report.notes:
            console.print(f"note: {n}", highlight=False)
        state = (
            "ok" if report.ok else f"{sum(report.as_json()['problem_counts'].values())} problems"
        )
        console.print(
            f"{state}: schema {c.get('schema_version')}, {c.get('rooms', 0)} rooms, "
            f"{c.get('events', 0)} events, {c.get('media', 0)} media, {c.get('keys', 0)} keys, "
            f"{c.get('inbox', 0)} inbox items",
            highlight=False,
        )

    emit(as_json, report.as_json(), human)
    if not report.ok:
        raise SystemExit(EXIT_FINAL)


@db.command("migrate")
@_db_where
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
