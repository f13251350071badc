"""`agentpost serve` at start: private files, one line for every start mistake, and what
it serves (the engine and where, never a password)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from hubproc import HubProcess, make_setup


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _serve(
    data: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `agentpost serve` expecting it to exit on its own (a start mistake)."""
    return subprocess.run(
        [sys.executable, "-m", "agentpost", "serve", "--data", str(data), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


def _one_line_error(p: subprocess.CompletedProcess[str], needle: str) -> None:
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("agentpost serve: ") and needle in lines[0], lines[0]


def test_data_dir_is_0700_and_its_files_0600(make_hub, tmp_path: Path) -> None:  # noqa: ANN001
    data = tmp_path / "hub"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)  # an older data dir, made readable for everyone
    hub = make_hub()
    assert hub.data_dir == data
    s = make_setup(hub, ["alice"], [])
    with hub.client(s.tokens["alice"]) as c:
        r = c.post(f"/v1/rooms/{s.room}/media", files={"file": ("a.txt", b"secret", "text/plain")})
        assert r.status_code == 201, r.text
        sha = r.json()["media"]["sha256"]
    assert _mode(data) == 0o700
    assert _mode(data / "admin.token") == 0o600
    assert _mode(data / "blobs") == 0o700
    assert _mode(data / "blobs" / sha[:2]) == 0o700
    assert _mode(data / "blobs" / sha[:2] / sha) == 0o600
    if hub.db_url is None:
        for name in ("hub.sqlite3", "hub.sqlite3-wal", "hub.sqlite3-shm"):
            assert _mode(data / name) == 0o600, name


@pytest.mark.sqlite_only
def test_an_older_readable_database_file_is_tightened(make_hub, tmp_path: Path) -> None:  # noqa: ANN001
    hub = make_hub()
    hub.stop()
    os.chmod(hub.data_dir / "hub.sqlite3", 0o644)
    make_hub()
    assert _mode(hub.data_dir / "hub.sqlite3") == 0o600


def test_a_port_in_use_is_one_line(make_hub, tmp_path: Path) -> None:  # noqa: ANN001
    hub = make_hub()
    port = hub.url.rsplit(":", 1)[1]
    p = _serve(tmp_path / "second", "--port", port)
    _one_line_error(p, f"port {port} on 127.0.0.1 is in use")


def test_a_read_only_data_dir_is_one_line(tmp_path: Path) -> None:
    data = tmp_path / "ro"
    data.mkdir(mode=0o700)
    # Root writes into a 0500 dir; an immutable one (chattr +i) refuses even root.
    lock = ["chattr", "+i", str(data)] if os.geteuid() == 0 else ["chmod", "0500", str(data)]
    unlock = ["chattr", "-i", str(data)] if os.geteuid() == 0 else ["chmod", "0700", str(data)]
    if subprocess.run(lock, capture_output=True).returncode != 0:
        pytest.skip("cannot make a read-only dir here")
    try:
        p = _serve(data, "--port", "0")
    finally:
        subprocess.run(unlock, check=True)
    _one_line_error(p, f"cannot use the data dir {data}: ")
    assert not (data / "admin.token").exists()


def test_a_data_dir_under_a_file_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    p = _serve(blocker / "data", "--port", "0")
    _one_line_error(p, f"cannot use the data dir {blocker / 'data'}")


def test_postgres_without_the_extra_is_one_line(tmp_path: Path) -> None:
    # A Python that cannot import psycopg, as after `pip install agentpost` without the extra.
    blocked = tmp_path / "site"
    blocked.mkdir()
    (blocked / "psycopg.py").write_text("raise ImportError('no psycopg here')\n")
    env = {
        "PYTHONPATH": f"{blocked}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "AGENTPOST_DB": "postgresql://u:pw@127.0.0.1/x",  # in --db it would also warn
    }
    p = _serve(tmp_path / "d", "--port", "0", env=env)
    _one_line_error(p, "pip install -e '.[postgres]'")
    assert "pw" not in p.stderr


def test_serve_says_which_database_and_where_the_token_is(make_hub) -> None:  # noqa: ANN001
    hub = make_hub()
    out = _startup_lines(hub)
    if hub.db_url is None:
        assert f"agentpost database: SQLite {hub.data_dir / 'hub.sqlite3'}" in out
    else:
        assert "agentpost database: PostgreSQL " in out
    assert f"admin token in {hub.data_dir / 'admin.token'}" in out
    env_hub = make_hub("env", env={"AGENTPOST_ADMIN_TOKEN": "s3cret"})
    out = _startup_lines(env_hub)
    assert "admin token from AGENTPOST_ADMIN_TOKEN" in out
    assert "admin.token" not in out and "s3cret" not in out


def _startup_lines(hub: HubProcess) -> str:
    """What the hub printed before its listening line (HubProcess keeps stdout open)."""
    assert hub.startup_output is not None
    return hub.startup_output


def test_a_postgres_password_is_never_printed(tmp_path: Path) -> None:
    from agentpost.store.open import describe

    url = "postgresql://app:hunter2@db.example:6432/agentpost?sslmode=require&password=x2"
    assert describe(url, tmp_path) == "PostgreSQL app@db.example:6432/agentpost"
    assert describe(None, tmp_path) == f"SQLite {tmp_path / 'hub.sqlite3'}"


def test_db_migrate_json_names_the_database_without_its_password(
    engine: str | None, tmp_path: Path
) -> None:
    args = ["--data", str(tmp_path / "m")] + (["--db", engine] if engine else [])
    p = subprocess.run(
        [sys.executable, "-m", "agentpost", "db", "migrate", "--json", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["schema_version"] >= 1
    if engine:
        assert out["database"].startswith("PostgreSQL ")
        password = urlsplit(engine).password
        if password:  # the user name may equal the password (CI's role does)
            assert f":{password}@" not in p.stdout
    else:
        assert out["database"] == f"SQLite {tmp_path / 'm' / 'hub.sqlite3'}"
        assert _mode(tmp_path / "m") == 0o700
        assert _mode(tmp_path / "m" / "hub.sqlite3") == 0o600


# -- one hub per SQLite data dir (docs/architecture.md#one-hub-per-data-dir)
# -------------------------------------------


@pytest.mark.sqlite_only
def test_a_second_hub_on_one_sqlite_data_dir_is_refused_in_one_line(make_hub) -> None:  # noqa: ANN001
    hub = make_hub()
    assert hub.proc is not None
    p = _serve(hub.data_dir, "--port", "0")  # another port, the same data dir
    _one_line_error(
        p,
        f"another hub (pid {hub.proc.pid}, {hub.url}) already serves {hub.data_dir}; "
        "stop it first or use another --data",
    )
    assert p.stdout == ""  # refused before it opened the database (no "database:" line)
    assert _mode(hub.data_dir / "hub.lock") == 0o600
    s = make_setup(hub, ["alice"], [])  # the first one still serves
    with hub.client(s.tokens["alice"]) as c:
        assert c.post(f"/v1/rooms/{s.room}/messages", json={"text": "hi"}).status_code == 201


@pytest.mark.sqlite_only
def test_after_kill_9_of_the_hub_a_new_one_starts_on_its_data_dir(make_hub) -> None:  # noqa: ANN001
    hub = make_hub()
    s = make_setup(hub, ["alice"], [])
    hub.kill()  # SIGKILL: no shutdown ran, the kernel released the lock
    again = make_hub()
    assert again.data_dir == hub.data_dir
    assert again.proc is not None
    lock = json.loads((again.data_dir / "hub.lock").read_text())
    assert lock == {"pid": again.proc.pid, "url": again.url}
    with again.client(s.tokens["alice"]) as c:
        assert c.get(f"/v1/rooms/{s.room}").status_code == 200
    p = _serve(again.data_dir, "--port", "0")
    _one_line_error(p, f"another hub (pid {again.proc.pid}, {again.url}) already serves")


def test_a_data_dir_with_postgres_allows_several_hub_processes(
    engine: str | None,
    make_hub,  # noqa: ANN001
) -> None:
    if engine is None:
        pytest.skip("PostgreSQL only: on SQLite one hub serves a data dir")
    first = make_hub()
    second = make_hub()  # the same data dir and database, as hub processes behind a balancer
    assert first.data_dir == second.data_dir and first.url != second.url
    s = make_setup(first, ["alice"], [])
    with second.client(s.tokens["alice"]) as c:
        assert c.post(f"/v1/rooms/{s.room}/messages", json={"text": "hi"}).status_code == 201


@pytest.mark.sqlite_only
def test_two_data_dirs_naming_one_sqlite_file_are_one_hub(tmp_path: Path) -> None:
    db = tmp_path / "shared" / "hub.sqlite3"
    db.parent.mkdir()
    first = HubProcess(tmp_path / "a", db_url=f"sqlite://{db}").start()
    try:
        p = _serve(tmp_path / "b", "--port", "0", "--db", f"sqlite://{db}")
        assert p.returncode != 0
        assert "another hub (pid" in p.stderr and "already serves" in p.stderr
        assert (db.parent / "hub.sqlite3.hub.lock").exists()
    finally:
        first.stop()
