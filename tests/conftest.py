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
import signal
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import hubproc  # noqa: E402
from hubproc import HubProcess, Setup, fresh_workspace, make_setup  # noqa: E402
from pgcluster import Cluster, server_binaries, server_lock  # noqa: E402

REQUIRE_PG = os.environ.get("AGENTPOST_REQUIRE_POSTGRES") == "1"


def pytest_configure(config: pytest.Config) -> None:
    """The suite's test workers run as a background job of a script would (`nohup … &`, a
    scheduler, a CI job): with SIGINT, SIGQUIT and SIGHUP ignored, which every child they
    start inherits. So a test that signals a child passes however the suite is launched only
    if it starts that child with default dispositions (`hubproc.with_default_signals`), and
    one that forgets fails here too, not only in the background. Workers only: a developer's
    Ctrl-C of `pytest` itself (the controller, or a run without `-n`) is left as it is."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
    # Hubs start as forks of a process that imported the hub once (tests/forkserver.py):
    # real processes, a fraction of the CPU. AGENTPOST_TEST_FORK_SERVER=0 starts each fresh.
    hubproc.FORK_SERVER = os.environ.get("AGENTPOST_TEST_FORK_SERVER", "1") != "0"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """What `-n auto` (the README's command) means: two workers a core. The suite spends
    most of its time waiting on other processes (hubs, Workers, real agents, polls with
    deadlines), not computing; `AGENTPOST_TEST_WORKERS` sets the count."""
    forced = os.environ.get("AGENTPOST_TEST_WORKERS")
    if forced:
        return int(forced)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return 2 * (cores or 1)


# Modules whose tests run long (real agents, Workers killed and waited out, whole walks):
# started first, so no worker begins one at the end of the run while the others sit idle.
# The order inside each module is kept, and so is the order of every other module.
LONG_FIRST = (
    "tests/ag2/test_agent_connect.py",
    "tests/ag2/test_one_lease.py",
    "tests/interop/",
    "tests/integration/test_docs_together.py",
    "tests/connect/test_worker_lease.py",
    "tests/connect/test_expired_wakeups.py",
    "tests/connect/test_agent_processes.py",
    "tests/integration/test_openapi.py",
    "tests/integration/test_multiprocess.py",
    "tests/chaos/",
)


def _long_rank(item: pytest.Item) -> int:
    where = item.nodeid.split("::", 1)[0]
    for rank, prefix in enumerate(LONG_FIRST):
        if where.startswith(prefix):
            return rank
    return len(LONG_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_long_rank)  # stable: every module keeps its own order
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

    # A test that restarts the server, or drops every connection to its database, must run
    # alone on it, even beside other pytest workers (xdist) or sessions: it takes the
    # server's lock exclusively, every other PostgreSQL test shares it.
    alone = "restart_postgres" in request.fixturenames or bool(
        request.node.get_closest_marker("drops_postgres_connections")
    )
    with server_lock(pg.dsn, exclusive=alone):
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


class SharedHubs:
    """One hub per engine for a whole test module (`shared_hub`), each on its own data dir
    and, on PostgreSQL, its own schema; stopped when the module ends."""

    def __init__(self, tmp: Path) -> None:
        self._tmp = tmp
        self._hubs: dict[str, HubProcess] = {}
        self._stack = ExitStack()

    def get(
        self, engine: str | None, postgres: Postgres | None, env: dict[str, str] | None = None
    ) -> HubProcess:
        name = "sqlite" if engine is None else "postgres"
        if name not in self._hubs:
            db_url = None if engine is None else self._schema(postgres)
            hub = HubProcess(
                self._tmp / name,
                env={"AGENTPOST_SSE_KEEPALIVE": "0.5", **(env or {})},
                db_url=db_url,
            ).start()
            self._stack.callback(hub.stop)
            self._hubs[name] = hub
        return self._hubs[name]

    def _schema(self, pg: Postgres | None) -> str:
        import psycopg

        assert pg is not None  # else the `engine` fixture skipped or failed already
        # Held for the hub's life: a server restart (which takes the lock exclusively) must
        # not drop this idle hub's connections between two of its tests.
        self._stack.enter_context(server_lock(pg.dsn, exclusive=False))
        schema = "m_" + uuid.uuid4().hex[:16]
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")

        def drop() -> None:
            with psycopg.connect(pg.dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

        self._stack.callback(drop)
        return pg.schema_dsn(schema)

    def close(self) -> None:
        self._stack.close()


@pytest.fixture(scope="module")
def _shared_hubs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedHubs]:
    hubs = SharedHubs(tmp_path_factory.mktemp("shared-hub"))
    yield hubs
    hubs.close()


@pytest.fixture
def shared_hub(
    request: pytest.FixtureRequest, engine: str | None, _shared_hubs: SharedHubs
) -> HubProcess:
    """A hub on the engine under test that the module's other tests use too (one start per
    module and engine, not per test). For tests that only need a hub and make their own
    workspace (`shared_setup`): never one that stops the hub, sets its flags or counts
    what is on it as a whole. Never in a module that restarts PostgreSQL
    (`restart_postgres`): this hub holds the server lock shared for the module's life.
    A module whose tests all need one setting of the hub names it in `SHARED_HUB_ENV`
    (a dict of environment variables at module level)."""
    pg: Postgres | None = request.getfixturevalue("postgres") if engine is not None else None
    env: dict[str, str] | None = getattr(request.module, "SHARED_HUB_ENV", None)
    return _shared_hubs.get(engine, pg, env)


@pytest.fixture
def shared_setup(shared_hub: HubProcess) -> Setup:
    """`setup`'s members and room in a workspace of this test's own on `shared_hub`."""
    return make_setup(shared_hub, ["alice", "carol"], ["bot", "helper"], workspace=fresh_workspace())
