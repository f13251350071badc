"""Fixtures: real hub processes on free loopback ports, on a real SQLite file or a real
PostgreSQL database (every hub test runs on both engines; docs/deploy.md).

PostgreSQL: `AGENTPOST_TEST_PG_DSN` names a database (`.ci/run` sets one); without it, when
the PostgreSQL server binaries are on the machine (`initdb`, `pg_ctl`), the suite starts a
throwaway cluster of its own (a temp dir, a free loopback port, removed at the end; see
`pgcluster.py`). Each test gets its own schema. With `AGENTPOST_REQUIRE_POSTGRES=1` (CI) a
missing database is a failure, not a skip.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hubproc import HubProcess, Setup, make_setup  # noqa: E402
from pgcluster import Cluster, server_binaries, server_lock  # noqa: E402

REQUIRE_PG = os.environ.get("AGENTPOST_REQUIRE_POSTGRES") == "1"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A test marked sqlite_only reaches into the SQLite file itself: no PostgreSQL twin.
    for item in items:
        callspec = getattr(item, "callspec", None)
        if (
            callspec
            and callspec.params.get("engine") == "postgres"
            and item.get_closest_marker("sqlite_only")
        ):
            item.add_marker(pytest.mark.skip(reason="reaches into the SQLite file itself"))


class Postgres:
    """The PostgreSQL the suite runs on: a DSN, and how to restart its server."""

    def __init__(self, dsn: str, cluster: Cluster | None) -> None:
        self.dsn = dsn
        self.cluster = cluster

    def schema_dsn(self, schema: str) -> str:
        sep = "&" if "?" in self.dsn else "?"
        return f"{self.dsn}{sep}options=-csearch_path%3D{schema}"

    def restart_command(self) -> list[str] | None:
        """A command that restarts the server fast (connections drop), or None."""
        if self.cluster is not None:
            return self.cluster.restart_command()
        if shutil.which("pg_ctlcluster") is None or not Path("/etc/postgresql").is_dir():
            return None
        version = sorted(p.name for p in Path("/etc/postgresql").iterdir())[0]
        return ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"] + [
            "-m",
            "fast",
        ]


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres | None]:
    """The explicit `AGENTPOST_TEST_PG_DSN`, else a throwaway cluster when the server
    binaries exist, else None (the PostgreSQL half is skipped)."""
    dsn = os.environ.get("AGENTPOST_TEST_PG_DSN")
    if dsn:
        yield Postgres(dsn, None)
        return
    binaries = server_binaries()
    if binaries is None:
        yield None
        return
    with Cluster(binaries) as cluster:
        yield Postgres(cluster.dsn, cluster)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The `--db` URL of the engine under test: None (SQLite in the data dir) or a fresh
    PostgreSQL schema."""
    if request.param == "sqlite":
        yield None
        return
    pg: Postgres | None = request.getfixturevalue("postgres")
    if pg is None:
        if REQUIRE_PG:
            pytest.fail("AGENTPOST_REQUIRE_POSTGRES=1 but AGENTPOST_TEST_PG_DSN is not set")
        pytest.skip("no PostgreSQL: set AGENTPOST_TEST_PG_DSN or install the server (initdb)")
    import psycopg

    # A test that restarts the server must run alone on it, even beside other pytest
    # workers (xdist) or sessions: it takes the server's lock exclusively, every other
    # PostgreSQL test shares it.
    with server_lock(pg.dsn, exclusive="restart_postgres" in request.fixturenames):
        schema = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        try:
            yield pg.schema_dsn(schema)
        finally:
            with psycopg.connect(pg.dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture
def restart_postgres(postgres: Postgres | None) -> list[str]:
    """The command that restarts the PostgreSQL server under test (skips when none)."""
    command = postgres.restart_command() if postgres is not None else None
    if command is None:
        pytest.skip("no way to restart this PostgreSQL server")
    return command


@pytest.fixture
def make_hub(tmp_path: Path, engine: str | None) -> Iterator[Callable[..., HubProcess]]:
    """Start hubs on the engine under test; `name` picks the data dir, so two hubs with
    different names share the database (PostgreSQL) but not their files."""
    started: list[HubProcess] = []

    def start(
        name: str = "hub", env: dict[str, str] | None = None, extra_args: list[str] | None = None
    ) -> HubProcess:
        h = HubProcess(
            tmp_path / name,
            env={"AGENTPOST_SSE_KEEPALIVE": "0.5", **(env or {})},
            extra_args=list(extra_args or []),
            db_url=engine,
        ).start()
        started.append(h)
        return h

    yield start
    for h in started:
        h.stop()


@pytest.fixture
def hub(make_hub: Callable[..., HubProcess]) -> HubProcess:
    return make_hub()


@pytest.fixture
def setup(hub: HubProcess) -> Setup:
    """Workspace `acme`: humans alice, carol; agents bot, helper; room `general` with all."""
    return make_setup(hub, ["alice", "carol"], ["bot", "helper"])
