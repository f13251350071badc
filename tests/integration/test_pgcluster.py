"""The suite's throwaway PostgreSQL cluster: it starts on a free loopback port, serves a
real database, restarts on demand, and leaves nothing behind."""

from __future__ import annotations

import subprocess

import pytest

from pgcluster import Cluster, server_binaries


def test_a_throwaway_cluster_serves_restarts_and_is_removed() -> None:
    binaries = server_binaries()
    if binaries is None:
        pytest.skip("no PostgreSQL server binaries (initdb) on this machine")
    import psycopg

    with Cluster(binaries) as cluster:
        assert cluster.dsn.startswith("postgresql://postgres@127.0.0.1:")
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE t (x int)")
            conn.execute("INSERT INTO t VALUES (1)")
        subprocess.run(cluster.restart_command(), check=True, capture_output=True, timeout=120)
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT x FROM t").fetchone()
            assert row == (1,)
            addr = conn.execute("SELECT inet_server_addr()::text").fetchone()
            assert addr is not None and addr[0].startswith("127.0.0.1")
        root = cluster.root
    assert not root.exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(cluster.dsn, connect_timeout=5)
