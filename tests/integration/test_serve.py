"""`agentpost serve`: the listening line, the admin token, restarts keep everything (§3)."""

from __future__ import annotations

from hubproc import HubProcess, make_setup


def test_restart_keeps_events_keys_and_tokens(tmp_path) -> None:  # noqa: ANN001
    hub = HubProcess(tmp_path / "hub").start()
    try:
        s = make_setup(hub, ["alice"], [])
        token = hub.admin_token
        with hub.client(s.tokens["alice"]) as c:
            first = c.post(
                f"/v1/rooms/{s.room}/messages", json={"text": "x"}, headers={"Idempotency-Key": "k"}
            )
    finally:
        hub.stop()
    hub2 = HubProcess(tmp_path / "hub").start()
    try:
        assert hub2.admin_token == token
        with hub2.client(s.tokens["alice"]) as c:
            again = c.post(
                f"/v1/rooms/{s.room}/messages", json={"text": "x"}, headers={"Idempotency-Key": "k"}
            )
            assert again.headers["idempotency-status"] == "replayed"
            assert again.content == first.content
    finally:
        hub2.stop()


def test_admin_token_env_overrides_the_file(tmp_path) -> None:  # noqa: ANN001
    hub = HubProcess(tmp_path / "hub", env={"AGENTPOST_ADMIN_TOKEN": "s3cret"}).start()
    try:
        with hub.client("s3cret") as admin:
            assert admin.post("/v1/admin/workspaces", json={"name": "w"}).status_code == 201
        assert not (hub.data_dir / "admin.token").exists()
        assert hub.url.startswith("http://127.0.0.1:")
    finally:
        hub.stop()


def test_newer_schema_is_refused(tmp_path) -> None:  # noqa: ANN001
    import sqlite3

    hub = HubProcess(tmp_path / "hub").start()
    hub.stop()
    db = sqlite3.connect(tmp_path / "hub" / "hub.sqlite3")
    db.execute("INSERT INTO schema_version VALUES (999)")
    db.commit()
    db.close()
    try:
        HubProcess(tmp_path / "hub").start(timeout=10)
    except RuntimeError as exc:
        assert "newer than this agentpost knows" in str(exc)
    else:
        raise AssertionError("the hub started on a schema newer than it knows")
