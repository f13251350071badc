"""One `agentpost connect` process for tests (its stderr is the Worker's log), shared by
tests/connect and tests/interop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import hubproc
from hubproc import poll


@dataclass
class WorkerProcess:
    """One `agentpost connect` process; its stderr is the Worker's log."""

    args: list[str]
    env: dict[str, str]
    log_path: Path
    proc: Any = None  # a subprocess.Popen, or a forkserver.ForkedProcess
    starts: int = 0
    python: list[str] = field(default_factory=lambda: [sys.executable])  # may run as another uid

    def start(self, wait_agent: bool = True) -> WorkerProcess:
        self.starts += 1
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.proc = self._forked(log) or subprocess.Popen(
                [*self.python, "-m", "agentpost", "connect", *self.args],
                stdout=log,
                stderr=log,
                env=self.env,
            )
        if wait_agent:
            poll(lambda: "agent started" in self.log()[offset:] or self._died(), timeout=60)
            assert not self._died(), self.log()
        return self

    def _forked(self, log: IO[bytes]) -> Any:
        """The Worker as a fork of this test worker's fork server (tests/forkserver.py), or
        None where it is off, the Worker runs as another user, or it needs a fresh start."""
        if not hubproc.FORK_SERVER or self.python != [sys.executable]:
            return None
        from forkserver import ForkedProcess, ForkServer

        server = ForkServer.get()
        if server is None or not server.fits(self.env):
            return None
        args = ["connect", *self.args]
        with open(os.devnull, "rb") as null:
            started = server.start(
                args, self.env, os.getcwd(), null.fileno(), log.fileno(), log.fileno()
            )
        return ForkedProcess(server, started, [sys.executable, "-m", "agentpost", *args], None)

    def _died(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.terminate()
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
