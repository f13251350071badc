"""Versioned schema migrations, applied at start (docs/deploy.md).

Migrations are numbered SQL files under `migrations/<dialect>/`; each applied version is
kept in `schema_version`. Every shipped version not applied yet is applied, in order, even
below the highest applied one (two branches may add numbers in either order). A hub
refuses to start on a schema newer than it knows.
"""

from __future__ import annotations

from importlib import resources

from agentpost import __version__
from agentpost.core.errors import AgentpostError, Code
from agentpost.store.engine import Db


class SchemaTooNew(AgentpostError):
    """The database was migrated by a newer agentpost; this one must not touch it."""

    def __init__(self, found: int, known: int) -> None:
        super().__init__(
            Code.SCHEMA_TOO_NEW,
            f"the database is at schema version {found}, newer than this agentpost knows "
            f"({__version__} reads versions up to {known}): run an agentpost that "
            f"knows schema version {found} or later, or restore a backup made before the "
            "upgrade; nothing was changed",
            found=found,
            known=known,
        )


def available(dialect: str) -> list[tuple[int, str]]:
    """(version, sql) pairs shipped for `dialect`, in order."""
    folder = resources.files("agentpost.store") / "migrations" / dialect
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.read_text("utf-8")))
    return sorted(found)


def known_version(engine: str) -> int:
    """The newest schema version this agentpost ships for `engine` ("sqlite", "postgresql"
    or a dialect name)."""
    shipped = available("postgres" if engine.startswith("postgres") else "sqlite")
    return shipped[-1][0] if shipped else 0


def current_version(db: Db) -> int:
    db.run("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
    row = db.one("SELECT MAX(version) FROM schema_version")
    return int(row[0]) if row and row[0] is not None else 0


def statements(sql: str) -> list[str]:
    """Split a migration file into statements (they contain no `;` inside literals). Whole
    comment lines go first, so a `;` in a comment splits nothing."""
    code = "\n".join(ln for ln in sql.splitlines() if not ln.strip().startswith("--"))
    return [text for chunk in code.split(";") if (text := chunk.strip())]


def pending(db: Db) -> list[tuple[int, str]]:
    """Migrations not yet applied; raises `SchemaTooNew` when the database is ahead of us."""
    shipped = available(db.dialect)
    known = shipped[-1][0] if shipped else 0
    have = current_version(db)
    if have > known:
        raise SchemaTooNew(have, known)
    applied = {int(r[0]) for r in db.all("SELECT version FROM schema_version")}
    return [(v, sql) for v, sql in shipped if v not in applied]
