"""The Worker's workspace folder (docs/connect.md): `worker-id`, `worker.lock`, the status
file `connect status` reads, `agent-group.json` (the agent's process group), the Turn
journal (`turns/`), and where a trigger's attachments are saved for the agent.

Durable means fsync'd: small files are replaced atomically (temp → fsync → rename → fsync
of the folder). Files are 0600, folders 0700.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

WORKER_ID = "worker-id"
LOCK = "worker.lock"
STATUS = "status.json"
LEDGER = "deliveries.sqlite3"
TURNS = "turns"
AGENT_GROUP = "agent-group.json"  # the agent's process group, to end its survivors at start
_ID = re.compile(r"^[0-9a-f]{32}$")
_EVENT_ID = re.compile(r"^ev_[0-9A-Za-z]{1,64}$")


def data_home() -> Path:
    """`$AGENTPOST_HOME`, else ~/.local/share/agentpost: the hub's default data dir and the
    parent of every Worker's default folder; never Turn egress."""
    home = os.environ.get("AGENTPOST_HOME")
    return Path(home) if home else Path.home() / ".local" / "share" / "agentpost"


_SAFE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


def default_dir(hub_url: str, workspace: str, member: str) -> Path:
    """The Worker's folder when `--workspace-dir` is not given: one per hub and agent member
    under the data home, outside any repo an agent works in (docs/connect.md). The hub is
    named by its normalized origin and path (`localhost` and `127.0.0.1` are two names, as
    the URL says); the names come from the hub and are checked before they name a folder.
    The folders are made 0700."""
    if not (_SAFE_NAME.match(workspace) and _SAFE_NAME.match(member)):
        raise WorkspaceError(f"the hub named {workspace!r}/{member!r}: not folder names")
    where = urlsplit(hub_url)
    scheme = where.scheme.lower()
    try:
        port = where.port or (443 if scheme == "https" else 80)
    except ValueError as exc:
        raise WorkspaceError(f"{hub_url!r} has no usable port") from exc
    host = (where.hostname or "hub").lower()
    path = where.path.strip("/")
    label = re.sub(r"[^A-Za-z0-9.-]", "_", f"{host}_{port}" + (f"_{path}" if path else ""))
    folder = data_home() / "workers" / label[:120] / workspace / member
    for step in (data_home(), data_home() / "workers", folder.parent.parent, folder.parent):
        step.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


class WorkspaceError(Exception):
    """The workspace cannot be used (locked by another Worker, unreadable worker-id)."""


def write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock_fd: int | None = None

    def prepare(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        (self.root / "files").mkdir(exist_ok=True, mode=0o700)
        (self.root / TURNS).mkdir(exist_ok=True, mode=0o700)

    def lock(self) -> None:
        """One Worker per workspace: an flock the kernel drops when the process dies."""
        fd = os.open(self.root / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WorkspaceError(
                f"another Worker runs on {self.root} (worker.lock is held)"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # the kernel drops the flock with its last descriptor
            self._lock_fd = None

    def locked_by_other(self) -> bool:
        """True while some live Worker holds the lock (for `connect status`)."""
        path = self.root / LOCK
        if not path.exists():
            return False
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def read_worker_id(self) -> str | None:
        """The stored worker id; None when there is none; `WorkspaceError` when unusable."""
        path = self.root / WORKER_ID
        try:
            text = path.read_text("ascii").strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise WorkspaceError(f"{path} cannot be read: {exc}") from exc
        if not _ID.match(text):
            raise WorkspaceError(f"{path} does not hold a worker id (32 hex characters)")
        return text

    def worker_id(self) -> str:
        """The worker id, minted once. A new id is never minted over an existing ledger:
        its entries' keys depend on the old one (docs/architecture.md#ledger)."""
        found = self.read_worker_id()
        if found is not None:
            return found
        if (self.root / LEDGER).exists():
            raise WorkspaceError(
                f"{self.root / WORKER_ID} is missing but a delivery ledger exists; "
                "refusing to mint a new worker id over it"
            )
        new = secrets.token_hex(16)
        write_atomic(self.root / WORKER_ID, (new + "\n").encode())
        return new

    # Attachments (docs/connect.md "The reply"): one folder per Session, given to the agent
    # as a root it may read; in it one folder per trigger. Only that Session's triggers'
    # files are saved in it, so a Session never sees another one's files by its roots.

    def session_files_dir(self, session_folder: str) -> Path:
        d = self.root / "files" / session_folder
        d.mkdir(exist_ok=True, mode=0o700)
        return d

    def turn_files_path(self, session_folder: str, event_id: str) -> Path:
        if not _EVENT_ID.match(event_id):
            raise WorkspaceError(f"not an event id: {event_id!r}")
        return self.root / "files" / session_folder / event_id

    def turn_files_dir(self, session_folder: str, event_id: str) -> Path:
        d = self.turn_files_path(session_folder, event_id)
        self.session_files_dir(session_folder)
        d.mkdir(exist_ok=True, mode=0o700)
        return d

    # -- the Turn journal (docs/connect.md "Turns"): the keys of a Turn with several parts,
    # written before its first part is posted and dropped once its reply is posted, so a
    # Worker killed between parts knows that part of the reply may be in the room.

    def _turn_path(self, trigger: str) -> Path:
        if not _EVENT_ID.match(trigger):
            raise WorkspaceError(f"not an event id: {trigger!r}")
        return self.root / TURNS / f"{trigger}.json"

    def write_turn(self, trigger: str, keys: list[str]) -> None:
        write_atomic(self._turn_path(trigger), json.dumps({"keys": keys}).encode())

    def read_turn(self, trigger: str) -> list[str] | None:
        """The journaled keys of an interrupted Turn; None when it has none. An unreadable
        entry counts as "something may have landed" (fail closed): `WorkspaceError`."""
        path = self._turn_path(trigger)
        try:
            data = json.loads(path.read_text("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise WorkspaceError(f"{path} cannot be read: {exc}") from exc
        found = data.get("keys") if isinstance(data, dict) else None
        if not isinstance(found, list) or not all(isinstance(k, str) for k in found):
            raise WorkspaceError(f"{path} does not hold a Turn's keys")
        return found

    def clear_turn(self, trigger: str) -> None:
        self._turn_path(trigger).unlink(missing_ok=True)

    def write_status(self, status: dict[str, Any]) -> None:
        write_atomic(self.root / STATUS, json.dumps(status, indent=1).encode())

    def read_status(self) -> dict[str, Any] | None:
        try:
            data = json.loads((self.root / STATUS).read_text("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise WorkspaceError(f"{self.root / STATUS} cannot be read: {exc}") from exc
        return data if isinstance(data, dict) else None
