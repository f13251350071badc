"""`agentpost serve`: the listening line, the admin token, restarts keep everything
(README.md "Five minutes with the hub")."""

from __future__ import annotations

import sqlite3

import httpx
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


def test_sigterm_ends_open_streams_and_long_polls_promptly_and_cleanly(
    make_hub, request: pytest.FixtureRequest  # noqa: ANN001
) -> None:
    """A normal stop while streams are open: a reading stream ends with its body complete,
    a long poll is answered, a reader that stopped reading is dropped, and the hub exits
    at once without a traceback (uvicorn's graceful timeout is 3 s; nothing waits for it)."""
    import signal
    import socket
    import threading
    import time
    from urllib.parse import urlsplit

    from hubproc import poll

    hub = make_hub()
    setup = make_setup(hub, ["alice", "carol"], ["bot"])
    big = "z" * 900_000
    with hub.client(setup.tokens["alice"], timeout=60) as c:
        for i in range(12):  # more than the kernel buffers of a reader that never reads
            body = {"text": f"big {i}", "metadata": {"blob": big}}
            assert c.post(f"/v1/rooms/{setup.room}/messages", json=body).status_code == 201
    ended: dict[str, object] = {}

    def reader() -> None:
        with hub.client(setup.tokens["alice"], timeout=30) as c:
            try:
                with c.stream("GET", f"/v1/rooms/{setup.room}/stream?after=12") as r:
                    for _ in r.iter_lines():
                        pass
                ended["reader"] = "complete"
            except httpx.HTTPError as exc:
                ended["reader"] = repr(exc)

    def long_poll() -> None:
        with hub.client(setup.tokens["carol"], timeout=30) as c:  # nothing wakes carol
            ended["poll"] = c.get("/v1/inbox", params={"wait": 30}).status_code

    url = urlsplit(hub.url)
    stuck = socket.socket()
    request.addfinalizer(stuck.close)
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    stuck.connect((url.hostname, url.port))
    stuck.sendall(
        f"GET /v1/rooms/{setup.room}/stream HTTP/1.1\r\nHost: {url.netloc}\r\n"
        f"Authorization: Bearer {setup.tokens['alice']}\r\n\r\n".encode()
    )
    threads = [threading.Thread(target=reader), threading.Thread(target=long_poll)]
    for t in threads:
        t.start()

    def opened() -> bool:
        with hub.client() as c:
            metrics = c.get("/metrics").text
        return (
            'agentpost_open_streams{kind="room"} 2.0' in metrics
            and 'agentpost_open_streams{kind="inbox_poll"} 1.0' in metrics
        )

    poll(opened, timeout=30)
    start = time.monotonic()
    hub.proc.send_signal(signal.SIGTERM)
    code = hub.wait_exit(30)
    took = time.monotonic() - start
    for t in threads:
        t.join(30)
    log = hub.log_path.read_text()
    assert "Traceback" not in log and "CancelledError" not in log, log
    assert "graceful shutdown exceeded" not in log, log
    assert ended == {"reader": "complete", "poll": 200}
    assert code in (0, -signal.SIGTERM), code
    assert took < 2.9, f"the hub took {took:.1f} s to stop"
