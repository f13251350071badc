"""Storage failures under a running hub (issue 2 "Failure and bad input"): a full disk and
a file system the kernel turned read-only. Posts answer 503 `storage_unavailable` with
Retry-After, nothing is half-written, no partial blob is left, and once the storage is
back the same key posts exactly once."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import httpx

from conftest import (
    Ext4Volume,
    all_events,
    assert_gap_free,
    fill,
    hub_env,
    prepared_hub,
    restart,
)
from hubproc import HubProcess


def post(c: httpx.Client, room: str, text: str, key: str) -> httpx.Response:
    return c.post(
        f"/v1/rooms/{room}/messages", json={"text": text}, headers={"Idempotency-Key": key}
    )


def upload(c: httpx.Client, room: str, data: bytes, key: str) -> httpx.Response:
    return c.post(
        f"/v1/rooms/{room}/media",
        files={"file": ("notes.bin", data, "application/octet-stream")},
        data={"text": "caption"},
        headers={"Idempotency-Key": key},
    )


def assert_storage_unavailable(r: httpx.Response) -> None:
    assert r.status_code == 503, r.text
    assert r.json()["error"]["code"] == "storage_unavailable"
    assert int(r.headers["Retry-After"]) > 0


def blob_files(data: Path) -> list[Path]:
    """Every file in the blob store, finished or temporary."""
    return sorted(p for p in (data / "blobs").rglob("*") if p.is_file())


def test_disk_full_post_is_503_nothing_half_written_then_same_key_posts_once(
    tmp_path: Path, tmpfs: Path
) -> None:
    hub, setup = prepared_hub(tmp_path / "hub", ["--data", str(tmpfs)])
    token = setup.tokens["alice"]
    try:
        with hub.client(token) as c:
            for i in (1, 2):
                assert post(c, setup.room, f"before {i}", f"pre-{i}").status_code == 201
            before = all_events(hub, token, setup.room)
            blobs_before = blob_files(tmpfs)
            ballast = tmpfs / "ballast"
            fill(ballast)

            assert_storage_unavailable(post(c, setup.room, "on a full disk", "full-1"))
            assert_storage_unavailable(upload(c, setup.room, os.urandom(200_000), "full-media"))
            assert all_events(hub, token, setup.room) == before
            assert blob_files(tmpfs) == blobs_before, "a partial upload was left behind"

            ballast.unlink()
            r = post(c, setup.room, "on a full disk", "full-1")
            assert r.status_code == 201, r.text
            assert r.headers["Idempotency-Status"] == "created"
            again = post(c, setup.room, "on a full disk", "full-1")
            assert again.headers["Idempotency-Status"] == "replayed"
            assert again.content == r.content
            m = upload(c, setup.room, b"fits now", "full-media")
            assert m.status_code == 201, m.text
            assert m.headers["Idempotency-Status"] == "created"
        events = all_events(hub, token, setup.room)
        assert_gap_free(events)
        assert [e["text"] for e in events] == ["before 1", "before 2", "on a full disk", "caption"]
        # What is on disk survives a restart unchanged: nothing half-written in the WAL.
        hub = restart(hub)
        assert all_events(hub, token, setup.room) == events
    finally:
        hub.stop()


def test_upload_bigger_than_free_space_is_503_and_leaves_no_temp_file(
    tmp_path: Path, tmpfs: Path
) -> None:
    hub, setup = prepared_hub(tmp_path / "hub", ["--data", str(tmpfs)])
    token = setup.tokens["alice"]
    try:
        with hub.client(token) as c:
            # Under the upload cap (25 MiB) but over what the 4 MiB disk holds.
            r = upload(c, setup.room, os.urandom(6 * 1024 * 1024), "too-big-for-disk")
            assert_storage_unavailable(r)
            assert blob_files(tmpfs) == []
            assert all_events(hub, token, setup.room) == []
            r = upload(c, setup.room, b"small", "too-big-for-disk")
            assert r.status_code == 201, r.text
        assert len(blob_files(tmpfs)) == 1
    finally:
        hub.stop()


def test_read_only_file_system_post_is_503_nothing_stored_then_same_key_posts_once(
    tmp_path: Path, ext4: Ext4Volume
) -> None:
    hub, setup = prepared_hub(tmp_path / "hub", ["--data", str(ext4.mnt)])
    token = setup.tokens["alice"]
    try:
        with hub.client(token) as c:
            assert post(c, setup.room, "before", "pre-1").status_code == 201
            ext4.fail()
            # The kernel really turned the file system read-only under the running hub.
            try:
                (ext4.mnt / "probe").write_bytes(b"x")
            except OSError as exc:
                assert exc.errno in (errno.EROFS, errno.EIO), exc
            else:
                raise AssertionError("the file system still takes writes")

            assert_storage_unavailable(post(c, setup.room, "on a dead disk", "ro-1"))
            assert_storage_unavailable(post(c, setup.room, "on a dead disk", "ro-1"))
            assert_storage_unavailable(upload(c, setup.room, b"bytes", "ro-media"))
            assert hub.proc is not None and hub.proc.poll() is None, "the hub died"
        # An ext4 error cannot be remounted rw in place: stop, fsck, mount, start again.
        hub.kill()
        ext4.umount()
        ext4.fsck()
        ext4.mount()
        hub = HubProcess(hub.data_dir, env=hub_env(), extra_args=hub.extra_args).start()
        assert [e["text"] for e in all_events(hub, token, setup.room)] == ["before"]
        assert blob_files(ext4.mnt) == []
        with hub.client(token) as c:
            r = post(c, setup.room, "on a dead disk", "ro-1")
            assert r.status_code == 201, r.text
            assert r.headers["Idempotency-Status"] == "created"
            assert post(c, setup.room, "on a dead disk", "ro-1").content == r.content
        events = all_events(hub, token, setup.room)
        assert_gap_free(events)
        assert [e["text"] for e in events] == ["before", "on a dead disk"]
    finally:
        hub.stop()
