"""`agentpost db backup | restore | verify` (issue 31, docs/architecture.md#operations,
docs/operations.md) on both engines: a backup of a hub that keeps serving posts and uploads,
restored into a new data home, serves every event and file it holds; refusals change nothing; a
verify finds what is damaged; a backup or restore killed with SIGKILL midway leaves nothing that
looks whole, and the next run succeeds."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from clirun import json_error
from hubproc import HubProcess, Setup, make_setup, poll

CRASH_ENV = "AGENTPOST_DB_CRASH_POINT"


def _db(
    args: list[str], hub: HubProcess, env: dict[str, str] | None = None, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """`agentpost db ARGS --json` for the data home of `hub` (its database by env)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("AGENTPOST_")}
    full |= env or {}
    if hub.db_url is not None and "AGENTPOST_DB" not in full:
        full["AGENTPOST_DB"] = hub.db_url
    return subprocess.run(
        [sys.executable, "-m", "agentpost", "db", *args, "--json"],
        capture_output=True,
        text=True,
        env=full,
        timeout=120,
        **kw,
    )


def _post(c: Any, room: str, text: str, key: str) -> None:
    r = c.post(f"/v1/rooms/{room}/messages", json={"text": text}, headers={"Idempotency-Key": key})
    assert r.status_code in (200, 201), r.text


def _upload(c: Any, room: str, data: bytes, name: str) -> None:
    r = c.post(f"/v1/rooms/{room}/media", files={"file": (name, data, "application/octet-stream")})
    assert r.status_code == 201, r.text


def _events(hub: HubProcess, token: str, room: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    with hub.client(token) as c:
        while True:
            r = c.get(f"/v1/rooms/{room}/events", params={"after": len(out), "limit": 500})
            assert r.status_code == 200, r.text
            page = r.json()["events"]
            if not page:
                return out
            out += page


@contextmanager
def _busy(hub: HubProcess, setup: Setup) -> Iterator[list[int]]:
    """Posts and uploads, without a pause, until the block ends; yields the count so far."""
    done = threading.Event()
    count = [0]
    failed: list[BaseException] = []

    def run() -> None:
        try:
            with hub.client(setup.tokens["alice"]) as c:
                while not done.is_set():
                    n = count[0]
                    if n % 5 == 0:
                        _upload(c, setup.room, os.urandom(50_000) + str(n).encode(), f"f{n}.bin")
                    else:
                        _post(c, setup.room, f"busy {n}", f"busy-{n}")
                    count[0] = n + 1
        except BaseException as exc:  # said by the test, not lost in the thread
            failed.append(exc)

    t = threading.Thread(target=run)
    t.start()
    try:
        yield count
    finally:
        done.set()
        t.join(60)
    assert not failed, failed


def _seed(hub: HubProcess) -> Setup:
    setup = make_setup(hub, ["alice", "carol"], ["bot"])
    with hub.client(setup.tokens["alice"]) as c:
        for i in range(30):
            _post(c, setup.room, f"seed {i}", f"seed-{i}")
        for i in range(3):
            _upload(c, setup.room, f"file {i}\n".encode() * 1000, f"seed{i}.txt")
    return setup


@pytest.fixture
def other_db(request: pytest.FixtureRequest, engine: str | None) -> Iterator[str | None]:
    """PostgreSQL: a new, empty database on the same server whose search_path is the schema
    under test (a backup restores into the schema it was taken from); SQLite: None."""
    if engine is None:
        yield None
        return
    import psycopg

    pg = request.getfixturevalue("postgres")
    name = "r_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(engine)
    try:
        yield urlunsplit(parts._replace(path="/" + name))
    finally:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _restored_hub(tmp_path: Path, other_db: str | None) -> HubProcess:
    return HubProcess(tmp_path / "restored", db_url=other_db).start()


def _restore(
    src: Path,
    hub: HubProcess,
    target: Path,
    other_db: str | None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    extra = {"AGENTPOST_DB": other_db} if other_db is not None else {}
    return _db(["restore", str(src), "--data", str(target)], hub, env={**extra, **(env or {})})


@pytest.mark.parametrize("engine", ["sqlite", "postgres"], indirect=True)
def test_a_backup_of_a_serving_hub_restores_every_event_and_file(
    hub: HubProcess, tmp_path: Path, other_db: str | None
) -> None:
    setup = _seed(hub)
    before = len(_events(hub, setup.tokens["alice"], setup.room))
    dest = tmp_path / "backup"
    with _busy(hub, setup) as count:
        while count[0] < 20:  # the writer is under way
            threading.Event().wait(0.01)
        p = _db(["backup", str(dest), "--data", str(hub.data_dir)], hub)
        assert p.returncode == 0, p.stdout + p.stderr
    manifest = json.loads(p.stdout)
    assert manifest["problems"] == [] and manifest["blobs"] >= 3
    assert manifest["counts"]["events"] >= before + 20
    assert oct(dest.stat().st_mode & 0o777) == "0o700"
    assert all(f.stat().st_mode & 0o077 == 0 for f in dest.rglob("*") if f.is_file())
    original = _events(hub, setup.tokens["alice"], setup.room)
    hub.stop()

    r = _restore(dest, hub, tmp_path / "restored", other_db)
    assert r.returncode == 0, r.stdout + r.stderr
    restored_hub = _restored_hub(tmp_path, other_db)
    try:
        restored = _events(restored_hub, setup.tokens["alice"], setup.room)
        # One moment of the room: a prefix of what the hub went on to hold, the seeds in it.
        assert len(restored) >= before + 20
        assert restored == original[: len(restored)]
        files = [a for ev in restored for a in ev["attachments"]]
        assert len(files) >= 3 + 4
        with restored_hub.client(setup.tokens["alice"]) as c:
            for a in files:
                got = c.get(f"/v1/media/{a['id']}")
                assert got.status_code == 200, got.text
                assert hashlib.sha256(got.content).hexdigest() == a["sha256"]
            _post(c, setup.room, "after the restore", "after-restore")  # it serves writes too
    finally:
        restored_hub.stop()
    v = _db(
        ["verify", "--data", str(tmp_path / "restored")],
        hub,
        env={"AGENTPOST_DB": other_db} if other_db else None,
    )
    assert v.returncode == 0, v.stdout + v.stderr
    assert json.loads(v.stdout)["ok"] is True


@pytest.mark.parametrize("engine", ["sqlite", "postgres"], indirect=True)
def test_refusals_change_nothing(hub: HubProcess, tmp_path: Path, other_db: str | None) -> None:
    _seed(hub)
    dest = tmp_path / "backup"
    assert _db(["backup", str(dest), "--data", str(hub.data_dir)], hub).returncode == 0

    # A backup onto something that is there.
    p = _db(["backup", str(dest), "--data", str(hub.data_dir)], hub)
    assert p.returncode == 1 and json_error(p)["code"] == "target_exists"

    # A restore into a data dir (SQLite) or database (PostgreSQL) that holds something.
    if other_db is None:
        busy = tmp_path / "busy"
        busy.mkdir()
        (busy / "notes.txt").write_text("mine")
        p = _restore(dest, hub, busy, None)
        assert p.returncode == 1 and json_error(p)["code"] == "target_not_empty"
        assert [f.name for f in busy.iterdir()] == ["notes.txt"]
    else:
        p = _db(["restore", str(dest), "--data", str(tmp_path / "same")], hub)
        assert p.returncode == 1 and json_error(p)["code"] == "target_not_empty"
        assert not (tmp_path / "same" / "blobs").exists()

    # A damaged backup: one file's bytes changed. Nothing is restored.
    blob = next(f for f in (dest / "blobs").rglob("*") if f.is_file())
    good = blob.read_bytes()
    blob.write_bytes(b"X" + good[1:])
    p = _restore(dest, hub, tmp_path / "fresh", other_db)
    err = json_error(p)
    assert p.returncode == 1 and err["code"] == "backup_invalid", err
    assert "do not match their hash" in err["message"]
    assert not (tmp_path / "fresh").exists()
    blob.write_bytes(good)

    # A backup of a newer schema than this agentpost knows.
    manifest = json.loads((dest / "manifest.json").read_text())
    (dest / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 999}))
    p = _restore(dest, hub, tmp_path / "fresh", other_db)
    err = json_error(p)
    assert err["code"] == "schema_too_new" and "999" in err["message"], err
    assert not (tmp_path / "fresh").exists()

    # Not a backup at all, or a manifest that is not one.
    p = _restore(tmp_path, hub, tmp_path / "fresh", other_db)
    assert json_error(p)["code"] == "backup_invalid"
    for bad in ([], {**manifest, "engine": None}, {**manifest, "counts": 3}):
        (dest / "manifest.json").write_text(json.dumps(bad))
        p = _restore(dest, hub, tmp_path / "fresh", other_db)
        assert json_error(p)["code"] == "backup_invalid", p.stdout + p.stderr
        assert not (tmp_path / "fresh").exists()


def _damage(hub: HubProcess, sql: list[str]) -> None:
    if hub.db_url is None:
        db = sqlite3.connect(hub.data_dir / "hub.sqlite3")
        for s in sql:
            db.execute(s)
        db.commit()
        db.close()
        return
    import psycopg

    with psycopg.connect(hub.db_url, autocommit=True) as pg:
        for s in sql:
            pg.execute(s)


@pytest.mark.parametrize("engine", ["sqlite", "postgres"], indirect=True)
def test_verify_says_what_is_damaged_and_changes_nothing(hub: HubProcess) -> None:
    setup = _seed(hub)
    v = _db(["verify", "--data", str(hub.data_dir)], hub)
    assert v.returncode == 0, v.stdout + v.stderr
    clean = json.loads(v.stdout)
    assert clean["ok"] and clean["counts"]["events"] == 33 and clean["counts"]["media"] == 3
    hub.stop()
    blobs = sorted((hub.data_dir / "blobs").glob("??/*"))
    blobs[0].unlink()
    blobs[1].write_bytes(b"tampered")
    _damage(
        hub,
        [
            f"DELETE FROM events WHERE room_id = '{setup.room}' AND seq = 7",
            "UPDATE idempotency_keys SET state = 'weird' WHERE key = 'seed-3'",
        ],
    )
    files_before = {p: p.stat().st_mtime_ns for p in hub.data_dir.rglob("*") if p.is_file()}
    v = _db(["verify", "--data", str(hub.data_dir)], hub)
    assert v.returncode == 1, v.stdout + v.stderr
    report = json.loads(v.stdout)
    checks = report["problem_counts"]
    # the event gone from the room was in the bot's inbox (the room's sole agent)
    assert checks == {"seqs": 1, "media": 2, "keys": 1, "inbox": 1}, report
    text = " ".join(p["message"] for p in report["problems"])
    assert "a gap" in text and "missing" in text and "weird" in text
    assert {p: p.stat().st_mtime_ns for p in hub.data_dir.rglob("*") if p.is_file()} == files_before


@pytest.mark.parametrize("engine", ["sqlite", "postgres"], indirect=True)
@pytest.mark.parametrize("point", ["backup:database", "backup:blob", "backup:written"])
def test_a_backup_killed_midway_leaves_no_backup_and_the_next_one_works(
    hub: HubProcess, tmp_path: Path, point: str
) -> None:
    _seed(hub)
    dest = tmp_path / "backup"
    p = _db(["backup", str(dest), "--data", str(hub.data_dir)], hub, env={CRASH_ENV: point})
    assert p.returncode == -9, p.stdout + p.stderr  # SIGKILL, midway
    assert not dest.exists()
    assert (tmp_path / ".backup.partial").exists()  # what it had written, set aside
    p = _db(["backup", str(dest), "--data", str(hub.data_dir)], hub)
    assert p.returncode == 0, p.stdout + p.stderr
    assert not (tmp_path / ".backup.partial").exists()
    assert json.loads(p.stdout)["blobs"] == 3


@pytest.mark.parametrize("engine", ["sqlite", "postgres"], indirect=True)
def test_a_restore_killed_midway_leaves_the_target_as_it_was_and_runs_again(
    hub: HubProcess, tmp_path: Path, other_db: str | None
) -> None:
    setup = _seed(hub)
    dest = tmp_path / "backup"
    assert _db(["backup", str(dest), "--data", str(hub.data_dir)], hub).returncode == 0
    hub.stop()
    point = "restore:copied" if other_db is None else "restore:blobs"
    target = tmp_path / "restored"
    p = _restore(dest, hub, target, other_db, env={CRASH_ENV: point})
    assert p.returncode == -9, p.stdout + p.stderr
    if other_db is None:
        assert not target.exists()  # the copy was under .restored.restoring
    else:
        import psycopg

        with psycopg.connect(other_db, autocommit=True) as pg:  # nothing restored yet
            assert pg.execute(
                "SELECT COUNT(*) FROM information_schema.tables WHERE "
                "table_schema = current_schema()"
            ).fetchone() == (0,)
    p = _restore(dest, hub, target, other_db)
    assert p.returncode == 0, p.stdout + p.stderr
    restored_hub = _restored_hub(tmp_path, other_db)
    try:
        assert len(_events(restored_hub, setup.tokens["alice"], setup.room)) == 33
    finally:
        restored_hub.stop()


@pytest.mark.parametrize("engine", ["sqlite", "postgres"], indirect=True)
def test_files_the_room_s_retention_ended_are_no_problem_for_a_backup(
    make_hub: Any, tmp_path: Path, other_db: str | None
) -> None:
    """Their bytes are gone on purpose: the backup holds the files that may still be
    downloaded, and restores."""
    hub = make_hub(env={"AGENTPOST_SWEEP_INTERVAL": "0.2", "AGENTPOST_BLOB_FREE_GRACE": "0"})
    setup = _seed(hub)
    with hub.client(setup.tokens["bot"]) as bot:  # the room's agent has seen them all
        cursor = bot.get("/v1/inbox", params={"after": 0}).json()["cursor"]
        assert bot.post("/v1/inbox/ack", json={"cursor": cursor}).status_code == 200
    with hub.client(hub.admin_token) as admin:
        r = admin.put(f"/v1/rooms/{setup.room}/retention", json={"media_seconds": 1})
        assert r.status_code == 200, r.text
    with hub.client(setup.tokens["alice"]) as c:
        media = [
            a["id"]
            for e in _events(hub, setup.tokens["alice"], setup.room)
            for a in e["attachments"]
        ]
        poll(lambda: all(c.get(f"/v1/media/{m}").status_code == 410 for m in media), timeout=30)
        with hub.client(hub.admin_token) as admin:
            admin.put(f"/v1/rooms/{setup.room}/retention", json={"media_seconds": 0})
        _upload(c, setup.room, b"kept\n", "kept.txt")
    dest = tmp_path / "backup"
    p = _db(["backup", str(dest), "--data", str(hub.data_dir)], hub)
    assert p.returncode == 0, p.stdout + p.stderr
    assert json.loads(p.stdout)["blobs"] == 1
    hub.stop()
    r = _restore(dest, hub, tmp_path / "restored", other_db)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("engine", ["postgres"], indirect=True)
def test_a_hub_in_the_public_schema_of_its_database_restores_into_a_new_one(
    engine: str | None, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The usual deployment (docs/deploy.md): a database of its own, the `public` schema."""
    import psycopg

    pg = request.getfixturevalue("postgres")
    names = ["s_" + uuid.uuid4().hex[:12], "r_" + uuid.uuid4().hex[:12]]
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        for name in names:
            conn.execute(f"CREATE DATABASE {name}")
    parts = urlsplit(pg.dsn)
    source, target = (urlunsplit(parts._replace(path="/" + n, query="")) for n in names)
    try:
        hub = HubProcess(tmp_path / "hub", db_url=source).start()
        try:
            setup = _seed(hub)
            dest = tmp_path / "backup"
            p = _db(["backup", str(dest), "--data", str(hub.data_dir)], hub)
            assert p.returncode == 0, p.stdout + p.stderr
            assert json.loads(p.stdout)["pg_schema"] == "public"
            original = _events(hub, setup.tokens["alice"], setup.room)
        finally:
            hub.stop()
        r = _restore(dest, hub, tmp_path / "restored", target)
        assert r.returncode == 0, r.stdout + r.stderr
        again = HubProcess(tmp_path / "restored", db_url=target).start()
        try:
            assert _events(again, setup.tokens["alice"], setup.room) == original
        finally:
            again.stop()
    finally:
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            for name in names:
                conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
