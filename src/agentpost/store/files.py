"""The hub's files are private to the user who runs it: the data dir 0700, its files 0600.

Every message is in `hub.sqlite3` and every upload under `blobs/`, so nothing the hub
writes may be readable by other local users. An older data dir made 0755/0644 is
tightened at start.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("agentpost.store.files")

DIR_MODE = 0o700
FILE_MODE = 0o600
# What the hub process creates from then on (blobs, temp files, SQLite's -wal and -shm).
UMASK = 0o077


def private_dir(path: Path) -> None:
    """Make `path` (and missing parents) and leave it 0700."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    _tighten(path, DIR_MODE)


def private_file(path: Path) -> None:
    """Create `path` empty if missing, and leave it 0600 (SQLite gives its -wal and -shm
    files the database file's mode)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE)
    os.close(fd)
    _tighten(path, FILE_MODE)


def _tighten(path: Path, mode: int) -> None:
    current = stat.S_IMODE(path.stat().st_mode)
    if current & ~mode:
        os.chmod(path, current & mode)
        log.warning("%s was mode %o; now %o (other users could read it)", path, current, mode)
