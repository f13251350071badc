"""Where a hub keeps its data, as the operations commands see it (docs/operations.md): the
`Store`, their one error (`OpsError`), and what both a backup (store/backup.py) and a check
(store/verify.py) need of it: a file's hash and a PostgreSQL connection. Below both, so
neither imports the other back."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentpost.core.errors import AgentpostError, Code

SQLITE_FILE = "hub.sqlite3"
_CHUNK = 1 << 20


class OpsError(AgentpostError):
    """A backup, restore or check that cannot be done as asked; nothing was changed."""


@dataclass(frozen=True)
class Store:
    """Where a hub keeps its data: the database (`db_url` None: `<data>/hub.sqlite3`) and the
    media bytes (`blob_dir`)."""

    db_url: str | None
    data_dir: Path
    blob_dir: Path

    @property
    def engine(self) -> str:
        return "sqlite" if self.db_url is None or self.db_url.startswith("sqlite") else "postgresql"

    @property
    def sqlite_path(self) -> Path:
        if self.db_url is None:
            return self.data_dir / SQLITE_FILE
        return Path(self.db_url.removeprefix("sqlite://"))


def hash_file(path: Path) -> tuple[str, int]:
    """(sha256 hex, size) of a file, read in chunks."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def pg_connect(url: str) -> Any:
    try:
        import psycopg
    except ImportError as exc:
        raise OpsError(
            Code.INVALID_REQUEST,
            "PostgreSQL needs the postgres extra: pip install -e '.[postgres]' in the clone",
        ) from exc
    try:
        return psycopg.connect(url, autocommit=True)
    except psycopg.Error as exc:
        raise OpsError(Code.STORAGE_UNAVAILABLE, f"cannot reach PostgreSQL: {exc}") from exc
