"""Upload temp files and crashes (docs/api.md Media): a hub killed with SIGKILL mid-upload
leaves a temp file behind, and the next start removes it; a hub starting on a blob dir that
another, live hub shares never removes that hub's upload in progress."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from hubproc import HubProcess, make_setup, poll

BOUNDARY = "tmpsweep42"
FILE = b"z" * 300_000


def _head(setup_room: str, token: str, host: str, length: int) -> bytes:
    return (
        f"POST /v1/rooms/{setup_room}/media HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {token}\r\nIdempotency-Key: slow\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def _body() -> bytes:
    return (
        f"--{BOUNDARY}\r\n".encode()
        + b'Content-Disposition: form-data; name="file"; filename="big.bin"\r\n'
        + b"Content-Type: application/octet-stream\r\n\r\n"
        + FILE
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )


def temp_files(blobs: Path) -> list[Path]:
    return sorted(p for p in (blobs / "tmp").iterdir() if p.is_file())


def _start_slow_upload(hub: HubProcess, room: str, token: str) -> tuple[socket.socket, bytes]:
    """Send the head and half the body, and wait until the hub is writing its temp file."""
    url = urlsplit(hub.url)
    assert url.hostname is not None and url.port is not None
    body = _body()
    sock = socket.create_connection((url.hostname, url.port), timeout=30)
    sock.sendall(_head(room, token, url.hostname, len(body)) + body[: len(body) // 2])
    return sock, body[len(body) // 2 :]


def test_temp_file_of_a_hub_killed_mid_upload_is_removed_at_the_next_start(
    make_hub: Callable[..., HubProcess],
) -> None:
    hub = make_hub()
    s = make_setup(hub, ["alice"], [])
    blobs = hub.data_dir / "blobs"
    sock, _rest = _start_slow_upload(hub, s.room, s.tokens["alice"])
    try:
        poll(lambda: any(p.stat().st_size > 0 for p in temp_files(blobs)), timeout=30)
        hub.kill()  # SIGKILL, mid-body
    finally:
        sock.close()
    assert temp_files(blobs), "the killed hub left its temp file (the case under test)"
    again = make_hub()  # same data dir, same database
    assert temp_files(blobs) == []
    with again.client(s.tokens["alice"]) as c:
        assert c.get(f"/v1/rooms/{s.room}/events").json()["events"] == []
        r = c.post(
            f"/v1/rooms/{s.room}/media",
            files={"file": ("big.bin", FILE, "application/octet-stream")},
            headers={"Idempotency-Key": "slow"},
        )
        assert r.status_code == 201 and r.headers["idempotency-status"] == "created"
    assert temp_files(blobs) == []


def test_a_starting_hub_leaves_a_live_hubs_upload_on_a_shared_blob_dir_alone(
    make_hub: Callable[..., HubProcess], tmp_path: Path
) -> None:
    shared = tmp_path / "shared-blobs"
    first = make_hub("a", extra_args=["--blobs", str(shared)])
    s = make_setup(first, ["alice"], [])
    sock, rest = _start_slow_upload(first, s.room, s.tokens["alice"])
    try:
        poll(lambda: any(p.stat().st_size > 0 for p in temp_files(shared)), timeout=30)
        writing = temp_files(shared)
        make_hub("b", extra_args=["--blobs", str(shared)])  # sweeps at its start
        assert temp_files(shared) == writing  # the live upload's file is still there
        sock.sendall(rest)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 201"), answer[:300]
    assert temp_files(shared) == []
    with first.client(s.tokens["alice"]) as c:
        media = c.get(f"/v1/rooms/{s.room}/events").json()["events"][0]["attachments"][0]
        got = c.get(f"/v1/media/{media['id']}")
        assert got.status_code == 200 and got.content == FILE
