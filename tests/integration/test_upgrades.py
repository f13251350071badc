"""Upgrades from every shipped schema version (issue 31, docs/operations.md "Upgrades"), on
both engines: a data home written by the agentpost that shipped version V
(tests/fixtures/schemas/vNN, made by its make.py from that release's own code) is started by
this hub, which migrates it; then every event that hub served is served the same, every file
downloads with its hash, a key posted then replays the event it made, a verify is clean and
the hub takes new posts. A database newer than this agentpost is refused, naming both
versions, and left as it was."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from agentpost.store import migrate
from hubproc import HubProcess

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "schemas"
SHIPPED = [v for v, _ in migrate.available("sqlite")]
INDEX: dict[str, dict[str, Any]] = json.loads((FIXTURES / "index.json").read_text())
YEAR = str(400 * 86400)  # the fixtures' keys were made long ago: keep them for the replay


def test_every_shipped_schema_version_has_a_fixture_on_both_engines() -> None:
    """Each set of migrations history had is a fixture (index.json, written by make.py);
    every shipped version is in one, the newest in one of its own."""
    assert [v for v, _ in migrate.available("postgres")] == SHIPPED
    assert sorted(p.name for p in FIXTURES.glob("v[0-9]*") if p.is_dir()) == sorted(INDEX)
    assert INDEX[f"v{SHIPPED[-1]:02d}"]["applied"] == SHIPPED, (
        "run tests/fixtures/schemas/make.py for the new version"
    )
    assert {v for fx in INDEX.values() for v in fx["applied"]} == set(SHIPPED)
    for name, fx in INDEX.items():
        facts = json.loads((FIXTURES / name / "facts.json").read_text())
        assert facts["applied"] == fx["applied"] and max(fx["applied"]) == fx["schema_version"]


def _schema_of(dsn: str) -> str:
    options = unquote(dsn.rpartition("options=")[2])
    return options.removeprefix("-csearch_path=")


def _install(name: str, engine: str | None, data: Path) -> dict[str, Any]:
    """The fixture `name` as the data home `data` (and the database `engine`)."""
    fx = FIXTURES / name
    data.mkdir(mode=0o700)
    prefix = "" if engine is None else "pg-"
    shutil.copytree(fx / f"{prefix}blobs", data / "blobs")
    shutil.copy(fx / f"{prefix}admin.token", data / "admin.token")
    os.chmod(data / "admin.token", 0o600)
    if engine is None:
        with gzip.open(fx / "hub.sqlite3.gz", "rb") as f:
            (data / "hub.sqlite3").write_bytes(f.read())
        os.chmod(data / "hub.sqlite3", 0o600)
        facts: dict[str, Any] = json.loads((fx / "facts.json").read_text())
        return facts
    import psycopg

    with gzip.open(fx / "postgres.sql.gz", "rt") as f:
        sql = f.read().replace("__SCHEMA__", _schema_of(engine))
    sql = "\n".join(ln for ln in sql.splitlines() if not ln.startswith("CREATE SCHEMA"))
    with psycopg.connect(engine, autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[call-overload]
    pg_facts: dict[str, Any] = json.loads((fx / "pg-facts.json").read_text())
    return pg_facts


def _version(hub: HubProcess) -> int:
    if hub.db_url is None:
        db = sqlite3.connect(hub.data_dir / "hub.sqlite3")
        try:
            return int(db.execute("SELECT MAX(version) FROM schema_version").fetchone()[0])
        finally:
            db.close()
    import psycopg

    with psycopg.connect(hub.db_url) as conn:
        row = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()
        assert row is not None
        return int(row[0])


_SAME = ("id", "seq", "room", "sender", "type", "text", "in_reply_to")


@pytest.mark.parametrize("name", sorted(INDEX))
@pytest.mark.parametrize("engine", ["sqlite", "postgres"], indirect=True)
def test_a_data_home_of_every_shipped_version_is_served_after_the_upgrade(
    engine: str | None, tmp_path: Path, name: str
) -> None:
    facts = _install(name, engine, tmp_path / "hub")
    hub = HubProcess(tmp_path / "hub", db_url=engine, extra_args=["--key-ttl-seconds", YEAR])
    hub.start()
    try:
        assert _version(hub) == SHIPPED[-1]
        room = facts["room"]
        with hub.client(facts["tokens"]["alice"]) as alice:
            r = alice.get(f"/v1/rooms/{room}/events", params={"after": 0})
            assert r.status_code == 200, r.text
            served = r.json()["events"]
            assert [{k: e.get(k) for k in _SAME} for e in served] == [
                {k: e.get(k) for k in _SAME} for e in facts["events"]
            ]
            files = [a for e in served for a in e["attachments"]]
            assert len(files) == 1
            got = alice.get(f"/v1/media/{files[0]['id']}")
            assert got.status_code == 200
            assert hashlib.sha256(got.content).hexdigest() == files[0]["sha256"]
            # A key used before the upgrade still names its event.
            r = alice.post(
                f"/v1/rooms/{room}/messages",
                json={"text": "message 0 @bot"},
                headers={"Idempotency-Key": "upgrade-0"},
            )
            assert r.headers["Idempotency-Status"] == "replayed", r.text
            assert r.json()["event"]["id"] == facts["keys"]["upgrade-0"]
            r = alice.post(f"/v1/rooms/{room}/messages", json={"text": "after the upgrade"})
            assert r.status_code == 201 and r.json()["event"]["seq"] == len(served) + 1
        with hub.client(facts["tokens"]["bot"]) as bot:  # the agent's inbox came along
            r = bot.get("/v1/inbox", params={"after": 0})
            assert r.status_code == 200 and r.json()["items"], r.text
    finally:
        hub.stop()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    if engine is not None:
        env["AGENTPOST_DB"] = engine
    v = subprocess.run(
        [sys.executable, "-m", "agentpost", "db", "verify", "--data", str(hub.data_dir), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert v.returncode == 0, v.stdout + v.stderr
    assert json.loads(v.stdout)["counts"]["events"] == len(facts["events"]) + 1


@pytest.mark.parametrize("engine", ["sqlite", "postgres"], indirect=True)
def test_a_database_newer_than_this_agentpost_is_refused_and_left_as_it_was(
    engine: str | None, tmp_path: Path
) -> None:
    _install(f"v{SHIPPED[-1]:02d}", engine, tmp_path / "hub")
    newer = SHIPPED[-1] + 1
    if engine is None:
        db = sqlite3.connect(tmp_path / "hub" / "hub.sqlite3")
        db.execute(f"INSERT INTO schema_version VALUES ({newer})")
        db.commit()
        before = list(db.iterdump())  # what it holds (the hub may set its journal mode)
        db.close()
    else:
        import psycopg

        with psycopg.connect(engine, autocommit=True) as conn:
            conn.execute(f"INSERT INTO schema_version VALUES ({newer})")
    hub = HubProcess(tmp_path / "hub", db_url=engine)
    with pytest.raises(RuntimeError) as refused:
        hub.start()
    said = str(refused.value)
    assert f"schema version {newer}, newer than this agentpost knows" in said, said
    assert f"reads versions up to {SHIPPED[-1]}" in said, said
    if engine is None:
        db = sqlite3.connect(tmp_path / "hub" / "hub.sqlite3")
        assert list(db.iterdump()) == before
        db.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    if engine is not None:
        env["AGENTPOST_DB"] = engine
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentpost",
            "db",
            "migrate",
            "--data",
            str(tmp_path / "hub"),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert p.returncode == 1 and json.loads(p.stdout)["error"]["code"] == "schema_too_new"
