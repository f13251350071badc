"""A restore checks what `db verify` checks (docs/operations.md "Backups",
docs/architecture.md#operations), on both engines where the damage exists on both: a
backup whose bytes changed since it was written (64 bytes flipped in its database), whose
rows fail a check (one event's seq moved), whose database is cut short, or whose manifest's
counts are not its rows' is refused (`backup_invalid`, naming the check, exit 1, never the
retry exit 75) and nothing is restored, unless `--force`; a backup written inside the data
dir it backs up is refused."""

# ruff: noqa: F811 - `other_db` is test_db_ops's fixture, taken by name
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from test_db_ops import _damage, _db, _restore, _seed, other_db  # noqa: F401 - a fixture

from clirun import json_error
from hubproc import HubProcess

BOTH = pytest.mark.parametrize("engine", ["sqlite", "postgres"], indirect=True)


def _database(backup: Path) -> Path:
    found = [p for p in (backup / "hub.sqlite3", backup / "hub.pgdump") if p.is_file()]
    assert len(found) == 1, found
    return found[0]


def _backup(hub: HubProcess, dest: Path) -> dict[str, object]:
    p = _db(["backup", str(dest), "--data", str(hub.data_dir)], hub)
    assert p.returncode == 0, p.stdout + p.stderr
    manifest: dict[str, object] = json.loads(p.stdout)
    return manifest


def _refused(p: object, check: str) -> str:
    err = json_error(p)  # type: ignore[arg-type]
    assert p.returncode == 1, err  # type: ignore[attr-defined]
    assert err["code"] == "backup_invalid" and not err["retryable"], err
    assert check in err["message"], err
    return str(err["message"])


def _empty(target: Path, other_db: str | None) -> None:
    """Nothing was restored: no data dir (SQLite) and no table (PostgreSQL)."""
    assert not target.exists() or not (target / "hub.sqlite3").exists()
    if other_db is not None:
        import psycopg

        with psycopg.connect(other_db, autocommit=True) as pg:
            n = pg.execute(
                "SELECT COUNT(*) FROM information_schema.tables"
                " WHERE table_schema = current_schema()"
            ).fetchone()
        assert n is not None and n[0] == 0


@BOTH
def test_the_manifest_records_every_file_s_sha256(hub: HubProcess, tmp_path: Path) -> None:
    _seed(hub)
    manifest = _backup(hub, tmp_path / "b")
    files = manifest["files"]
    assert isinstance(files, dict)
    db = _database(tmp_path / "b")
    assert files[db.name] == hashlib.sha256(db.read_bytes()).hexdigest()
    assert "admin.token" in files


@BOTH
def test_flipped_bytes_in_the_database_are_refused_and_nothing_is_restored(
    hub: HubProcess, tmp_path: Path, other_db: str | None
) -> None:
    _seed(hub)
    _backup(hub, tmp_path / "b")
    db = _database(tmp_path / "b")
    data = bytearray(db.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    db.write_bytes(bytes(data))
    p = _restore(tmp_path / "b", hub, tmp_path / "fresh", other_db)
    _refused(p, "sha256")
    _empty(tmp_path / "fresh", other_db)


@BOTH
def test_a_moved_seq_is_refused_naming_the_check(
    hub: HubProcess, tmp_path: Path, other_db: str | None
) -> None:
    setup = _seed(hub)
    hub.stop()
    # The hub's own rows are damaged before the backup: its bytes are what it wrote, its
    # rows fail `db verify` (on PostgreSQL, found once restored and taken out again).
    _damage(hub, [f"UPDATE events SET seq = 1000 WHERE room_id = '{setup.room}' AND seq = 5"])
    _backup(hub, tmp_path / "b")
    p = _restore(tmp_path / "b", hub, tmp_path / "fresh", other_db)
    message = _refused(p, "seqs")
    assert "--force" in message
    _empty(tmp_path / "fresh", other_db)
    forced = _db(
        ["restore", str(tmp_path / "b"), "--data", str(tmp_path / "fresh"), "--force"],
        hub,
        env={"AGENTPOST_DB": other_db} if other_db else None,
    )
    assert forced.returncode == 0, forced.stdout + forced.stderr
    if other_db is None:  # PostgreSQL's rows are checked once restored: not when forced
        said = json.loads(forced.stdout)["problems_forced"]
        assert "seqs" in {p["check"] for p in said}, said


@BOTH
def test_a_truncated_database_is_a_problem_exit_1_never_a_retry(
    hub: HubProcess, tmp_path: Path, other_db: str | None
) -> None:
    _seed(hub)
    _backup(hub, tmp_path / "b")
    db = _database(tmp_path / "b")
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    manifest["files"][db.name] = hashlib.sha256(db.read_bytes()).hexdigest()  # a forged one
    (tmp_path / "b" / "manifest.json").write_text(json.dumps(manifest))
    p = _restore(tmp_path / "b", hub, tmp_path / "fresh", other_db)
    _refused(p, "integrity")
    _empty(tmp_path / "fresh", other_db)
    if other_db is None:  # verify of the backup's SQLite database: exit 1 too, not 75
        v = _db(["verify", "--data", str(tmp_path / "b")], hub)
        assert v.returncode == 1, v.stdout + v.stderr
        assert json.loads(v.stdout)["problem_counts"] == {"integrity": 1}


@BOTH
def test_manifest_counts_set_to_zero_are_refused(
    hub: HubProcess, tmp_path: Path, other_db: str | None
) -> None:
    _seed(hub)
    _backup(hub, tmp_path / "b")
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    manifest["counts"] = {k: 0 for k in manifest["counts"]}
    (tmp_path / "b" / "manifest.json").write_text(json.dumps(manifest))
    p = _restore(tmp_path / "b", hub, tmp_path / "fresh", other_db)
    message = _refused(p, "counts")
    assert "the manifest counts 0 events, the database holds 33" in message
    _empty(tmp_path / "fresh", other_db)


@BOTH
def test_a_backup_inside_the_data_dir_it_backs_up_is_refused(
    hub: HubProcess, tmp_path: Path
) -> None:
    _seed(hub)
    for inside in (hub.data_dir / "backup", hub.data_dir / "blobs" / "backup"):
        p = _db(["backup", str(inside), "--data", str(hub.data_dir)], hub)
        err = json_error(p)
        assert p.returncode == 1 and err["code"] == "invalid_request", err
        assert "inside" in err["message"], err
        assert not inside.exists()
    _backup(hub, tmp_path / "beside")  # next to it is fine
