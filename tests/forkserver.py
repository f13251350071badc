"""`python -m agentpost …` as a real process for the price of a fork, not of a Python start.

Most of a hub's start (and of a CLI call's) is Python importing the hub: about 0.6 s of CPU
a start, and the suite starts over a thousand. A fork server is one Python process per test
worker that has imported `agentpost` (CLI, hub, store) once and forks a child for each
command line it is handed: the child takes the caller's environment, working directory,
stdin, stdout and stderr (passed as descriptors over a Unix socket), then runs
`agentpost.cli.main` as `python -m agentpost` would, and ends as an interpreter ends (its exit
handlers run, stdout is flushed). It is a process of its own: its pid can be signalled,
SIGKILL kills it, its exit code is reported back. What differs from a fresh interpreter: its
command line in `ps` is the server's, and variables read at interpreter start (PYTHON*) are
the server's — a command whose environment changes one of those is started the usual way
(`ForkServer.fits`).

Used by `hubproc.HubProcess.start`, `clirun.agentpost` and `workerproc.WorkerProcess.start`
when `hubproc.FORK_SERVER` is on (the suite's conftest).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import IO, Any

PRELOAD = (
    "agentpost.cli.app",
    "agentpost.cli.serve",
    "agentpost.cli.secrets",
    "agentpost.hub.serve",
    "agentpost.hub.app",
    "agentpost.store.open",
    "uvicorn",
    "uvloop",
    "psycopg",
    "psycopg_pool",
    "agentpost.cli.connect",
    "agentpost.cli.mail",
    "agentpost.mail.commands",
    "agentpost.cli.mcp",
    "agentpost.mcp.server",  # the mcp SDK: a server loads it in its first second
    "agentpost.connect.worker",
    "acp",  # the Worker loads the ACP SDK when it starts its agent
    "acp.client.connection",
    "acp.schema",
)
MAX_MESSAGE = 1 << 20


# --- the server (its own process) ------------------------------------------------------------


def _serve(sock: socket.socket, listener: socket.socket) -> None:
    """Fork a child for each job that comes on `sock` (the test worker's) or on a connection
    to `listener` (a `forkrun.py` launcher's, for a process a library spawns itself); tell
    the asker its pid and job number, then its exit code."""
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    assert threading.active_count() == 1, "a fork server must not run threads"
    sock.send(b'{"ready": true}')
    # A pid comes round again in a long run (pid_max may be 32768): every child is known by
    # the number of its job, never by its pid alone.
    jobs: dict[int, tuple[int, socket.socket]] = {}
    launchers: list[socket.socket] = []
    count = 0
    while True:
        _reap(jobs, launchers)
        readable, _, _ = select.select([sock, listener, *launchers], [], [], 0.02)
        for ready in readable:
            if ready is listener:
                conn, _ = listener.accept()
                launchers.append(conn)
                continue
            try:
                msg, fds, _, _ = socket.recv_fds(ready, MAX_MESSAGE, 3)
            except OSError:
                msg, fds = b"", []
            if not msg:
                if ready is sock:  # the test worker is gone
                    os._exit(0)
                launchers.remove(ready)  # a launcher gone: its child runs on, unreported
                for pid, (number, asker) in list(jobs.items()):
                    if asker is ready:
                        jobs[pid] = (number, sock)
                ready.close()
                continue
            job = json.loads(msg)
            count += 1
            pid = os.fork()
            if pid == 0:
                _become(job, fds, [sock, listener, *launchers])  # never returns
            jobs[pid] = (count, ready)
            for fd in fds:
                os.close(fd)
            _tell(ready, {"pid": pid, "job": count})


def _tell(to: socket.socket, note: dict[str, Any]) -> None:
    try:
        to.send(json.dumps(note).encode())
    except OSError:
        pass  # a launcher that is gone


def _reap(jobs: dict[int, tuple[int, socket.socket]], launchers: list[socket.socket]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        number, asker = jobs.pop(pid)
        _tell(asker, {"exit": number, "code": os.waitstatus_to_exitcode(status)})


def _become(job: dict[str, Any], fds: list[int], socks: list[socket.socket]) -> None:
    """In the forked child: become `python -m agentpost ARGS` and end as an interpreter ends."""
    code: object = 0
    try:
        for sock in socks:
            sock.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, 4096)  # as subprocess's close_fds
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        sys.argv = [str(Path(__file__)), *job["args"]]
        from agentpost.cli import main

        main(job["args"], prog_name="agentpost")
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = 120 if code == 0 else code
    if code is None:
        os._exit(0)
    if isinstance(code, int):
        os._exit(code & 0xFF)
    os.write(2, f"{code}\n".encode())
    os._exit(1)


# --- the test worker's side -----------------------------------------------------------------


class ForkedProcess:
    """The parts of `subprocess.Popen` the suite uses, for a process the server forked."""

    def __init__(
        self, server: ForkServer, started: tuple[int, int], args: list[str], stdout: IO[str] | None
    ):
        self._server = server
        self.pid, self._job = started
        self.args = args
        self.stdout = stdout
        self.stdin = None
        self.stderr = None
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._server.exit_code(self._job)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            code = self._server.wait_exit(self._job, timeout)
            if code is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self.returncode = code
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """One server per test worker process, started at first use."""

    _lock = threading.Lock()
    _instance: ForkServer | None = None
    _owner_pid = 0

    @classmethod
    def get(cls) -> ForkServer | None:
        """The server of this process, or None where none can run (it failed to start)."""
        with cls._lock:
            if cls._instance is None or cls._owner_pid != os.getpid():
                try:
                    cls._instance = cls()
                    cls._owner_pid = os.getpid()
                except OSError:
                    return None
            return cls._instance

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._dir = tempfile.mkdtemp(prefix="forkserver-")
        self.path = os.path.join(self._dir, "socket")  # where forkrun.py launchers ask
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(self.path)
        listener.listen(64)
        self._proc = subprocess.Popen(
            [sys.executable, __file__, str(theirs.fileno()), str(listener.fileno())],
            pass_fds=[theirs.fileno(), listener.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        theirs.close()
        listener.close()
        self._sock = ours
        ready = ours.recv(MAX_MESSAGE)
        if json.loads(ready or b"{}").get("ready") is not True:
            raise OSError("the fork server did not start")
        self._cond = threading.Condition()
        self._exits: dict[int, int] = {}
        self._started: list[tuple[int, int]] = []  # (pid, job) answers, in order
        self._ask = threading.Lock()
        threading.Thread(target=self._read, name="fork-server", daemon=True).start()
        atexit.register(self.close)
        self._start_env = {k: v for k, v in os.environ.items() if k.startswith("PYTHON")}

    def fits(self, env: dict[str, str]) -> bool:
        """Whether a forked child would start as a fresh interpreter with `env` would."""
        wanted = {k: v for k, v in env.items() if k.startswith("PYTHON")}
        return wanted == self._start_env

    def start(
        self, args: list[str], env: dict[str, str], cwd: str, stdin: int, stdout: int, stderr: int
    ) -> tuple[int, int]:
        """Fork `agentpost ARGS`: its (pid, job number)."""
        job = json.dumps({"args": args, "env": env, "cwd": cwd}).encode()
        with self._ask:
            socket.send_fds(self._sock, [job], [stdin, stdout, stderr])
            with self._cond:
                while not self._started:
                    if not self._cond.wait(30):
                        raise OSError("the fork server did not answer")
                return self._started.pop(0)

    def run(
        self,
        args: list[str],
        env: dict[str, str],
        input: str | None,
        timeout: float,
        cwd: str | os.PathLike[str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """`subprocess.run(args, capture_output=True, text=True, input=…)` for `args` =
        `[python, "-m", "agentpost", …]`."""
        pipes = [os.pipe() for _ in range(3)]
        (in_r, in_w), (out_r, out_w), (err_r, err_w) = pipes
        try:
            started = self.start(args[3:], env, str(cwd or os.getcwd()), in_r, out_w, err_w)
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        proc = ForkedProcess(self, started, args, None)
        got: dict[int, bytes] = {}

        def drain(fd: int) -> None:
            with open(fd, "rb") as f:
                got[fd] = f.read()

        def feed() -> None:
            with open(in_w, "wb") as f:
                try:
                    f.write((input or "").encode())
                except BrokenPipeError:
                    pass

        threads = [
            threading.Thread(target=t, args=a, daemon=True)
            for t, a in ((drain, (out_r,)), (drain, (err_r,)), (feed, ()))
        ]
        for t in threads:
            t.start()
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            raise
        for t in threads:
            t.join(timeout)
        out = got.get(out_r, b"").decode("utf-8", "replace")
        err = got.get(err_r, b"").decode("utf-8", "replace")
        return subprocess.CompletedProcess(args, code, out, err)

    def exit_code(self, job: int) -> int | None:
        with self._cond:
            return self._exits.get(job)

    def wait_exit(self, job: int, timeout: float | None) -> int | None:
        with self._cond:
            self._cond.wait_for(lambda: job in self._exits, timeout)
            return self._exits.get(job)

    def _read(self) -> None:
        while True:
            try:
                msg = self._sock.recv(MAX_MESSAGE)
            except OSError:
                return
            if not msg:
                return
            note = json.loads(msg)
            with self._cond:
                if "pid" in note:
                    self._started.append((note["pid"], note["job"]))
                else:
                    self._exits[note["exit"]] = note["code"]
                self._cond.notify_all()

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(10)
        shutil.rmtree(self._dir, ignore_errors=True)


if __name__ == "__main__":
    _serve(socket.socket(fileno=int(sys.argv[1])), socket.socket(fileno=int(sys.argv[2])))
