"""Choose the engine from a database URL: SQLite by default (DESIGN.md §8)."""

from __future__ import annotations

from pathlib import Path

from agentpost.core.errors import Code, RequestError
from agentpost.store.engine import Engine
from agentpost.store.sqlite import SQLiteEngine


def open_engine(db_url: str | None, data_dir: Path) -> Engine:
    """`None` → `<data>/hub.sqlite3`; `sqlite:///PATH` → that file."""
    if db_url is None:
        return SQLiteEngine(data_dir / "hub.sqlite3")
    if db_url.startswith("sqlite:///"):
        return SQLiteEngine(Path(db_url.removeprefix("sqlite://")))
    raise RequestError(
        Code.INVALID_REQUEST, f"unsupported database URL {db_url!r} (expected sqlite:///PATH)"
    )
