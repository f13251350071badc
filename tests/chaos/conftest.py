"""Helpers for crash and storage-failure tests: keyed bursts against a real hub process,
retries until every key is answered, and the exactly-once checks (docs/api.md)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from hubproc import HubProcess, Setup, make_setup

ADMIN_TOKEN = "chaos-admin-token"
THREADS = 16


def hub_env(**extra: str) -> dict[str, str]:
    return {"AGENTPOST_ADMIN_TOKEN": ADMIN_TOKEN, "AGENTPOST_SSE_KEEPALIVE": "0.5", **extra}


def restart(old: HubProcess, **env: str) -> HubProcess:
    """A new hub process on the same data dir (and the same storage flags)."""
    old.stop()
    return HubProcess(old.data_dir, env=hub_env(**env), extra_args=old.extra_args).start()


def prepared_hub(data_dir: Path, extra_args: list[str] | None = None) -> tuple[HubProcess, Setup]:
    """A hub with the workspace `acme` and room `general`, ready to take posts.

    `extra_args=["--data", DIR]` puts the store on DIR (the last `--data` wins) while the
    hub's log stays in `data_dir`, off the file system under test."""
    hub = HubProcess(data_dir, env=hub_env(), extra_args=extra_args or []).start()
    return hub, make_setup(hub, ["alice"], ["bot"])


@dataclass
class Ack:
    """What a client saw for one key: the acknowledged event id, or None (no answer)."""

    status: int | None = None
    event_id: str | None = None


@dataclass
class Burst:
    """Keyed posts `text = key` from many threads; remembers every 2xx answer."""

    url: str
    token: str
    room: str
    keys: list[str]
    acks: dict[str, Ack] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def acked(self) -> int:
        with self.lock:
            return sum(1 for a in self.acks.values() if a.event_id is not None)

    def _post_all(self, keys: list[str]) -> None:
        with httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=10.0
        ) as c:
            for key in keys:
                try:
                    r = c.post(
                        f"/v1/rooms/{self.room}/messages",
                        json={"text": key},
                        headers={"Idempotency-Key": key},
                    )
                except httpx.TransportError:
                    ack = Ack()  # the hub died: no answer for this key
                else:
                    assert r.status_code == 201, (r.status_code, r.text)
                    ack = Ack(r.status_code, r.json()["event"]["id"])
                with self.lock:
                    self.acks[key] = ack

    @contextlib.contextmanager
    def run(self, threads: int = THREADS) -> Iterator[None]:
        """Start posting; yields while the burst runs; joins all threads on exit."""
        slices = [self.keys[i::threads] for i in range(threads)]
        with ThreadPoolExecutor(threads) as pool:
            futures = [pool.submit(self._post_all, s) for s in slices]
            yield
            for f in futures:
                f.result(timeout=60)


def post_until_2xx(hub: HubProcess, token: str, room: str, key: str, text: str) -> httpx.Response:
    deadline = time.monotonic() + 20
    with hub.client(token) as c:
        while True:
            r = c.post(
                f"/v1/rooms/{room}/messages", json={"text": text}, headers={"Idempotency-Key": key}
            )
            if 200 <= r.status_code < 300:
                return r
            assert r.status_code in (409, 503), (r.status_code, r.text)
            assert time.monotonic() < deadline, f"key {key!r} never got a 2xx: {r.text}"


def retry_all(hub: HubProcess, token: str, room: str, keys: list[str]) -> dict[str, dict]:
    """Retry every key until a 2xx; each key's final answer (status, header, event)."""

    def one(key: str) -> dict:
        r = post_until_2xx(hub, token, room, key, key)
        return {
            "status": r.status_code,
            "idem": r.headers["Idempotency-Status"],
            "event": r.json()["event"],
        }

    with ThreadPoolExecutor(THREADS) as pool:
        return dict(zip(keys, pool.map(one, keys), strict=True))


def all_events(hub: HubProcess, token: str, room: str) -> list[dict]:
    out: list[dict] = []
    with hub.client(token) as c:
        while True:
            after = out[-1]["seq"] if out else 0
            r = c.get(f"/v1/rooms/{room}/events", params={"after": after, "limit": 1000})
            assert r.status_code == 200, r.text
            page = r.json()["events"]
            if not page:
                return out
            out.extend(page)


def assert_gap_free(events: list[dict]) -> None:
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def assert_exactly_once(
    hub: HubProcess, setup: Setup, keys: list[str], acks: dict[str, Ack], before: int = 0
) -> list[dict]:
    """After retrying every key: one event per key, gap-free seq, acked posts unchanged."""
    token = setup.tokens["alice"]
    answers = retry_all(hub, token, setup.room, keys)
    events = all_events(hub, token, setup.room)
    assert_gap_free(events)
    assert len(events) == before + len(keys)
    by_text: dict[str, list[dict]] = {}
    for e in events[before:]:
        by_text.setdefault(e["text"], []).append(e)
    assert sorted(by_text) == sorted(keys)
    dupes = {t: len(es) for t, es in by_text.items() if len(es) != 1}
    assert not dupes, f"stored more than once: {dupes}"
    for key in keys:
        stored = by_text[key][0]
        assert answers[key]["event"] == stored, key
        ack = acks.get(key)
        if ack is not None and ack.event_id is not None:
            assert stored["id"] == ack.event_id, f"acked {key!r} changed"
            assert answers[key]["idem"] == "replayed", key
    return events


def fill(path: Path) -> None:
    """Write a ballast file until the file system says ENOSPC."""
    chunk = b"\0" * 65536
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                break
        chunk = b"\0" * 4096
        while True:  # the last pages too
            try:
                os.write(fd, chunk)
            except OSError:
                break
    finally:
        os.close(fd)


# -- storage fixtures ------------------------------------------------------------------


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted for the test, unmounted after it."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    r = _run("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt))
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root / CAP_SYS_ADMIN): {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        _run("umount", "-l", str(mnt))


@dataclass
class Ext4Volume:
    """A small ext4 file system on a loop device, mounted `errors=remount-ro`."""

    image: Path
    device: str
    mnt: Path

    def mount(self) -> None:
        r = _run("mount", "-o", "errors=remount-ro", self.device, str(self.mnt))
        assert r.returncode == 0, r.stderr

    def umount(self) -> None:
        r = _run("umount", str(self.mnt))
        assert r.returncode == 0, r.stderr

    def fail(self) -> None:
        """Make the kernel hit an ext4 error: it aborts the journal and goes read-only,
        exactly as on a failing disk, under the feet of the running hub."""
        name = Path(self.device).name
        Path(f"/sys/fs/ext4/{name}/trigger_fs_error").write_text("agentpost chaos test\n")

    def fsck(self) -> None:
        r = _run("e2fsck", "-fy", self.device)
        assert r.returncode in (0, 1), r.stdout + r.stderr  # 1: errors corrected


@pytest.fixture
def ext4(tmp_path: Path) -> Iterator[Ext4Volume]:
    for tool in ("losetup", "mkfs.ext4", "e2fsck"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    image = tmp_path / "ext4.img"
    with open(image, "wb") as f:
        f.truncate(32 * 1024 * 1024)
    r = _run("losetup", "-f", "--show", str(image))
    if r.returncode != 0:
        pytest.skip(f"cannot attach a loop device here: {r.stderr.strip()}")
    device = r.stdout.strip()
    mnt = tmp_path / "ext4"
    mnt.mkdir()
    vol = Ext4Volume(image, device, mnt)
    try:
        r = _run("mkfs.ext4", "-q", "-F", device)
        assert r.returncode == 0, r.stderr
        r = _run("mount", "-o", "errors=remount-ro", device, str(mnt))
        if r.returncode != 0:
            pytest.skip(f"cannot mount ext4 here: {r.stderr.strip()}")
        if not Path(f"/sys/fs/ext4/{Path(device).name}/trigger_fs_error").exists():
            pytest.skip("this kernel has no ext4 trigger_fs_error")
        yield vol
    finally:
        _run("umount", "-l", str(mnt))
        _run("losetup", "-d", device)
