"""Start a real hub process on a free loopback port, for tests and benches."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

LISTENING = re.compile(r"agentpost hub listening on (http://\S+)")


# The suite turns this on (tests/conftest.py): hubs start as forks of a server that has
# imported the hub once (tests/forkserver.py), not as fresh interpreters.
FORK_SERVER = False


def _forked(args: list[str], env: dict[str, str], log: IO[str]) -> Any:
    """`python ARGS` (`-m agentpost …`) forked from this worker's fork server, or None
    where the server is off or cannot start it as a fresh interpreter would."""
    if not FORK_SERVER or args[:2] != ["-m", "agentpost"]:
        return None
    from forkserver import ForkedProcess, ForkServer

    server = ForkServer.get()
    if server is None or not server.fits(env):
        return None
    read_end, write_end = os.pipe()
    with open(os.devnull, "rb") as null:
        started = server.start(args[2:], env, os.getcwd(), null.fileno(), write_end, log.fileno())
    os.close(write_end)
    return ForkedProcess(server, started, args, open(read_end, encoding="utf-8"))


@dataclass
class HubProcess:
    data_dir: Path
    env: dict[str, str] = field(default_factory=dict)
    extra_args: list[str] = field(default_factory=list)
    db_url: str | None = None
    proc: Any = None  # a subprocess.Popen, or a forkserver.ForkedProcess
    url: str = ""
    log_path: Path | None = None
    startup_output: str | None = None

    def start(self, timeout: float = 20.0) -> HubProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.data_dir / f"hub-{time.time_ns()}.log"
        env = {**os.environ, **self.env}
        cmd = [
            sys.executable,
            "-m",
            "agentpost",
            "serve",
            "--port",
            "0",
            "--data",
            str(self.data_dir),
            *self.extra_args,
        ]
        if self.db_url:
            cmd += ["--db", self.db_url]
        with open(self.log_path, "w") as log:  # the child keeps its own copy of the fd
            self.proc = _forked(cmd[1:], env, log) or subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=env
            )
        deadline = time.monotonic() + timeout
        assert self.proc.stdout is not None
        before: list[str] = []
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            before.append(line)
            if not line:
                if self.proc.poll() is not None:
                    self._close()
                    raise RuntimeError(f"hub exited early: {self.log_path.read_text()}")
                continue
            m = LISTENING.search(line)
            if m:
                self.url = m.group(1)
                self.startup_output = "".join(before)
                return self
        self.kill()
        raise RuntimeError("hub did not print its listening line in time")

    @property
    def admin_token(self) -> str:
        return (
            self.env.get("AGENTPOST_ADMIN_TOKEN")
            or (self.data_dir / "admin.token").read_text().strip()
        )

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._close()

    def _close(self) -> None:
        if self.proc and self.proc.stdout and not self.proc.stdout.closed:
            self.proc.stdout.close()

    def wait_exit(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close()

    def client(self, token: str | None = None, timeout: float = 10.0) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)


@dataclass
class Setup:
    """A workspace with members and one room, made through the real admin API."""

    hub: HubProcess
    workspace: str
    tokens: dict[str, str]
    room: str


def make_setup(
    hub: HubProcess,
    humans: list[str],
    agents: list[str],
    room: str = "general",
    workspace: str = "acme",
) -> Setup:
    tokens: dict[str, str] = {}
    with hub.client(hub.admin_token) as admin:
        r = admin.post("/v1/admin/workspaces", json={"name": workspace})
        assert r.status_code == 201, r.text
        for name in humans:
            r = admin.post(
                f"/v1/admin/workspaces/{workspace}/members", json={"name": name, "kind": "human"}
            )
            assert r.status_code == 201, r.text
            tokens[name] = r.json()["token"]
        for name in agents:
            body = {"name": name, "kind": "agent", "owner": humans[0]}
            r = admin.post(f"/v1/admin/workspaces/{workspace}/members", json=body)
            assert r.status_code == 201, r.text
            tokens[name] = r.json()["token"]
    with hub.client(tokens[humans[0]]) as c:
        others = [n for n in humans[1:] + agents]
        r = c.post(f"/v1/workspaces/{workspace}/rooms", json={"name": room, "participants": others})
        assert r.status_code == 201, r.text
        room_id = r.json()["room"]["id"]
    return Setup(hub=hub, workspace=workspace, tokens=tokens, room=room_id)


def fresh_workspace() -> str:
    """A workspace name no other test uses, for tests that share one hub."""
    return "w" + uuid.uuid4().hex[:12]


def poll(predicate, timeout: float = 10.0, interval: float = 0.02):  # noqa: ANN001, ANN201
    """Poll `predicate` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met before the deadline")
        time.sleep(interval)


# A program the tests start that they will signal must not depend on how the suite was
# launched: a shell starts `&` jobs with SIGINT and SIGQUIT ignored (`nohup` adds SIGHUP),
# children inherit that, and Python keeps a SIGINT that was ignored at start ignored. The
# wrapper sets these back to their defaults, then execs the program (a disposition set to
# default survives exec); no preexec_fn, which is unsafe in a process with threads.
_DEFAULT_SIGNALS = (
    "import os, signal, sys\n"
    "for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGTERM):\n"
    "    signal.signal(s, signal.SIG_DFL)\n"
    "os.execv(sys.argv[1], sys.argv[1:])\n"
)


def with_default_signals(argv: list[str]) -> list[str]:
    """`argv` run with SIGINT, SIGQUIT, SIGHUP and SIGTERM at their defaults, whatever the
    suite inherited (`argv[0]` must be a path, as `sys.executable` is)."""
    return [sys.executable, "-c", _DEFAULT_SIGNALS, *argv]
