"""One mail writer per clone: `flock` on `.git/agentpost/lock`.

Two terminals syncing at once would fetch, import and publish twice; the lock makes
them take turns (docs/mail.md). The kernel releases it when a process dies, so a
killed sync never blocks the next one.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agentpost.mail.errors import MailBusy
from agentpost.mail.fsio import ensure_dir

_POLL_SECONDS = 0.05


@contextmanager
def mail_lock(path: Path, wait_seconds: float) -> Iterator[None]:
    """Hold the lock; wait up to `wait_seconds` (0: try once), then raise MailBusy."""
    ensure_dir(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + wait_seconds
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError as exc:
                if time.monotonic() >= deadline:
                    raise MailBusy(f"another mail command holds {path}") from exc
                time.sleep(_POLL_SECONDS)
        yield
    finally:
        os.close(fd)
