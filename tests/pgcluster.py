"""A throwaway PostgreSQL cluster for the test suite, when the server binaries exist but no
`AGENTPOST_TEST_PG_DSN` names a database: initdb in a temp dir, a free loopback port,
trust auth for the one local user, stopped and removed at the end.

initdb refuses to run as root; as root the cluster belongs to the `postgres` system user.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType


def server_binaries() -> Path | None:
    """The newest dir holding `initdb` and `pg_ctl`: Debian's /usr/lib/postgresql/*/bin,
    else wherever PATH has them."""
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        dirs.append(str(Path(on_path).parent))
    for d in dirs:
        if (Path(d) / "initdb").exists() and (Path(d) / "pg_ctl").exists():
            return Path(d)
    return None


def _version(bin_dir: str) -> int:
    name = Path(bin_dir).parent.name
    return int(name) if name.isdigit() else 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Cluster:
    def __init__(self, binaries: Path) -> None:
        self.bin = binaries
        self.root = Path(tempfile.mkdtemp(prefix="agentpost-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.user: str | None = None
        if os.geteuid() == 0:
            self.user = "postgres"
            pw = pwd.getpwnam(self.user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / args[0]), *args[1:]],
            capture_output=True,
            text=True,
            check=check,
            user=self.user,
            cwd=self.root,
            timeout=120,
        )

    def _pg_ctl(self, action: str, *extra: str) -> list[str]:
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} "
            "-c max_connections=400 -c shared_buffers=32MB"
        )
        return [str(self.bin / "pg_ctl"), action, "-D", str(self.data), "-w", "-t", "60"] + [
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
            *extra,
        ]

    def restart_command(self) -> list[str]:
        """Restart the server fast (every connection drops), as whoever owns the cluster."""
        command = self._pg_ctl("restart", "-m", "fast")
        return ["runuser", "-u", self.user, "--", *command] if self.user else command

    def __enter__(self) -> Cluster:
        try:
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8")
            subprocess.run(
                self._pg_ctl("start"),
                capture_output=True,
                text=True,
                check=True,
                user=self.user,
                cwd=self.root,
                timeout=120,
            )
        except subprocess.CalledProcessError as exc:
            log = self.root / "server.log"
            detail = log.read_text() if log.exists() else ""
            self._remove()
            raise RuntimeError(
                f"throwaway PostgreSQL did not start: {exc.stderr}{exc.stdout}{detail}"
            ) from exc
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._run("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w", check=False)
        self._remove()

    def _remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def server_lock(dsn: str, exclusive: bool) -> Iterator[None]:
    """A machine-wide reader/writer lock per PostgreSQL server (flock on a temp file)."""
    digest = hashlib.sha256(dsn.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"agentpost-test-pg-{digest}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
