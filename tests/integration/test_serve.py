"""`agentpost serve`: the listening line, the admin token, restarts keep everything (§3)."""

from __future__ import annotations

import sqlite3

import pytest

from hubproc import HubProcess, make_setup


def test_restart_keeps_events_keys_and_tokens(make_hub) -> None:  # noqa: ANN001
    hub = make_hub()
    s = make_setup(hub, ["alice"], [])
    token = hub.admin_token
    with hub.client(s.tokens["alice"]) as c:
        first = c.post(
            f"/v1/rooms/{s.room}/messages", json={"text": "x"}, headers={"Idempotency-Key": "k"}
        )
    hub.stop()
    hub2 = make_hub()  # same data dir, same database
    assert hub2.admin_token == token
    with hub2.client(s.tokens["alice"]) as c:
        again = c.post(
            f"/v1/rooms/{s.room}/messages", json={"text": "x"}, headers={"Idempotency-Key": "k"}
        )
        assert again.headers["idempotency-status"] == "replayed"
        assert again.content == first.content


def test_admin_token_env_overrides_the_file(make_hub) -> None:  # noqa: ANN001
    hub = make_hub(env={"AGENTPOST_ADMIN_TOKEN": "s3cret"})
    with hub.client("s3cret") as admin:
        assert admin.post("/v1/admin/workspaces", json={"name": "w"}).status_code == 201
    assert not (hub.data_dir / "admin.token").exists()
    assert hub.url.startswith("http://127.0.0.1:")


def _bump_schema(hub: HubProcess) -> None:
    if hub.db_url is None:
        db = sqlite3.connect(hub.data_dir / "hub.sqlite3")
        db.execute("INSERT INTO schema_version VALUES (999)")
        db.commit()
        db.close()
        return
    import psycopg

    with psycopg.connect(hub.db_url, autocommit=True) as pg:
        pg.execute("INSERT INTO schema_version VALUES (999)")


def test_newer_schema_is_refused(make_hub) -> None:  # noqa: ANN001
    hub = make_hub()
    hub.stop()
    _bump_schema(hub)
    with pytest.raises(RuntimeError, match="newer than this agentpost knows"):
        make_hub()


def test_unknown_database_url_is_refused(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(RuntimeError, match="unsupported database URL"):
        HubProcess(tmp_path / "hub", db_url="mysql://nope").start(timeout=10)
