"""One hub process per SQLite data dir (docs/architecture.md#one-hub-per-data-dir): an `flock` on
`<data>/hub.lock`.

The lock is taken before the database is opened and held for the life of the process; the
kernel releases it when the process ends, however it ends (kill -9 included), so a crashed
hub never blocks the next start. The file names the holder (its pid, then its URL once the
port is bound), so a second start is refused in one line that says which hub to stop.
On PostgreSQL many hub processes share a database by design: no lock is taken.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from pathlib import Path

LOCK_FILE = "hub.lock"


class DataDirBusy(Exception):
    """Another live hub process holds the data dir's lock."""

    def __init__(self, data_dir: Path, pid: int | None, url: str | None) -> None:
        who = ", ".join([f"pid {pid}" if pid else "pid unknown", *([url] if url else [])])
        super().__init__(
            f"another hub ({who}) already serves {data_dir}; stop it first or use another --data"
        )
        self.pid, self.url = pid, url


def lock_path(db_url: str | None, data_dir: Path) -> Path:
    """Where the lock lives: in the data dir, or next to a `sqlite:///PATH` file (two data
    dirs naming one database file are one hub's)."""
    if db_url is not None and db_url.startswith("sqlite:///"):
        db = Path(db_url.removeprefix("sqlite://"))
        return db.with_name(db.name + ".hub.lock")
    return data_dir / LOCK_FILE


def needs_lock(db_url: str | None) -> bool:
    """SQLite (the default, or `sqlite:///PATH`) allows one hub process per data dir."""
    return db_url is None or db_url.startswith("sqlite:///")


class DataDirLock:
    """The held lock; keep the object for as long as the hub serves."""

    def __init__(self, data_dir: Path, path: Path | None = None) -> None:
        self.path = path or data_dir / LOCK_FILE
        self._fd: int | None = None
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                pid, url = _holder(fd)
                raise DataDirBusy(data_dir, pid, url) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self.record(None)

    def record(self, url: str | None) -> None:
        """Name this process (and, once bound, its URL) in the lock file. The new text is
        written over the old and then cut to length: a reader never sees it empty."""
        assert self._fd is not None
        data = json.dumps({"pid": os.getpid(), "url": url}).encode() + b"\n"
        os.pwrite(self._fd, data, 0)
        os.ftruncate(self._fd, len(data))
        os.fsync(self._fd)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor releases the flock
            self._fd = None


def _holder(fd: int) -> tuple[int | None, str | None]:
    """What the holder wrote; tolerant: a file being rewritten may be partly read."""
    try:
        raw = os.pread(fd, 4096, 0)
        found = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError):
        return None, None
    if not isinstance(found, dict):
        return None, None
    pid, url = found.get("pid"), found.get("url")
    return (
        pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        url if isinstance(url, str) else None,
    )
