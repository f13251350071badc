"""Fixtures: real hub processes on free loopback ports, on a real SQLite file or a real
PostgreSQL database (every hub test runs on both engines; DESIGN.md §8).

PostgreSQL runs when `AGENTPOST_TEST_PG_DSN` names a database; each test gets its own
schema. With `AGENTPOST_REQUIRE_POSTGRES=1` (CI) a missing database is a failure, not a skip.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from hubproc import HubProcess, Setup, make_setup  # noqa: E402

PG_DSN = os.environ.get("AGENTPOST_TEST_PG_DSN")
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


def pg_schema_dsn(schema: str) -> str:
    assert PG_DSN is not None
    sep = "&" if "?" in PG_DSN else "?"
    return f"{PG_DSN}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """The `--db` URL of the engine under test: None (SQLite in the data dir) or a fresh
    PostgreSQL schema."""
    if request.param == "sqlite":
        yield None
        return
    if not PG_DSN:
        if REQUIRE_PG:
            pytest.fail("AGENTPOST_REQUIRE_POSTGRES=1 but AGENTPOST_TEST_PG_DSN is not set")
        pytest.skip("set AGENTPOST_TEST_PG_DSN to run the PostgreSQL half")
    import psycopg

    schema = "t_" + uuid.uuid4().hex[:16]
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield pg_schema_dsn(schema)
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


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
