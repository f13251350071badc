"""Choose the engine from a database URL: SQLite by default (docs/deploy.md)."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

from agentpost.core.errors import Code, RequestError
from agentpost.store import migrate
from agentpost.store.engine import Db, Engine
from agentpost.store.sqlite import SQLiteEngine


def open_engine(db_url: str | None, data_dir: Path) -> Engine:
    """`None` → `<data>/hub.sqlite3`; `sqlite:///PATH` → that file; `postgresql://…` →
    PostgreSQL (any number of hub processes may share it)."""
    if db_url is None:
        return SQLiteEngine(data_dir / "hub.sqlite3")
    if db_url.startswith("sqlite:///"):
        return SQLiteEngine(Path(db_url.removeprefix("sqlite://")))
    if db_url.startswith(("postgresql://", "postgres://")):
        try:
            from agentpost.store.postgres import PostgresEngine
        except ImportError as exc:
            raise RequestError(
                Code.INVALID_REQUEST,
                "PostgreSQL needs the postgres extra: pip install -e '.[postgres]' in the clone",
            ) from exc
        writers = int(os.environ.get("AGENTPOST_PG_WRITERS", "4"))
        return PostgresEngine(db_url, writers=max(1, writers))
    raise RequestError(
        Code.INVALID_REQUEST,
        # only the scheme: the rest of a URL may hold a password
        f"unsupported database URL '{db_url.partition(':')[0]}:…' "
        "(expected sqlite:///PATH or postgresql://…)",
    )


def describe(db_url: str | None, data_dir: Path) -> str:
    """Which database a URL names, for people to read: the engine and where it is, never
    a password (the user, host, port and database name of a PostgreSQL URL only)."""
    if db_url is None:
        return f"SQLite {data_dir / 'hub.sqlite3'}"
    if db_url.startswith("sqlite:///"):
        return f"SQLite {db_url.removeprefix('sqlite://')}"
    if db_url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(db_url)
        user = f"{parts.username}@" if parts.username else ""
        try:
            port = f":{parts.port}" if parts.port else ""
        except ValueError:
            port = ""
        return f"PostgreSQL {user}{parts.hostname or 'localhost'}{port}{parts.path or '/'}"
    return "an unsupported database URL"


def schema_version(db: Db) -> int:
    """The applied schema version (for `agentpost db migrate`)."""
    return migrate.current_version(db)
