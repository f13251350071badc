"""The keeper: the small parent between the Worker and its agent
(docs/architecture.md#agent-processes), and the one module that calls `prctl` (Linux only):
the keeper's own calls, and the Worker's `forbid_dumping` (its token stays with it).

The Worker spawns `python -S keeper.py --worker <pid> [--fence <fd>] -- <agent argv…>` as
the leader of a new session (its process group and session id are its pid). The keeper
- sets `PR_SET_CHILD_SUBREAPER` (a descendant whose parent dies is re-parented to the
  keeper, even one that left the group with `setsid`) and `PR_SET_PDEATHSIG` (`SIGUSR1`
  when the Worker dies), then checks `getppid()` once more: a Worker already dead before
  that is seen there;
- spawns the agent with the same stdin, stdout and stderr (no relaying: the agent talks to
  the Worker over the pipes directly; the keeper then lets go of stdin and stdout);
- on `SIGUSR1` (the Worker died, or the Worker cut the agent off) SIGKILLs everything at
  once: no agent of a dead Worker may do further work;
- on `SIGTERM` (a stop or an agent restart) sends SIGTERM to everything, waits `GRACE`
  seconds, then SIGKILLs what is left;
- when the agent exits by itself, ends the rest the same way (SIGTERM, `GRACE`, SIGKILL);
- exits once no descendant is left (or `KILL_WAIT` seconds of SIGKILL did not end one,
  stuck in the kernel), with the agent's status: its exit code, or the
  same signal it died of, so the Worker sees what it saw before the keeper existed;
- with `--fence`, is fenced by time (docs/architecture.md#fenced-by-time):
  the fd is one end of a socket pair whose other end the Worker keeps. The Worker writes
  `until <T>\n` each time it renewed its lease, T a `CLOCK_MONOTONIC` time (the same clock
  for every process of the host) by which its lease could have passed to a standby, less a
  margin. When T passes with no later line (the Worker is frozen by SIGSTOP or Ctrl-Z, or
  cannot reach the hub) the keeper SIGSTOPs everything; a later T resumes it (SIGCONT).
  Whether the lease moved only the Worker can learn: it then ends the group (`SIGUSR1`).
  The keeper writes back `agent <pid> <start>\n` once the agent runs, and `stopped <T>\n`
  and `resumed\n` (for the Worker's log).
"Everything" is every process of the keeper's session or group and every descendant of the
keeper (subreaped ones included), signalled through a pidfd after a re-check, so a
recycled pid is never hit. A descendant that escapes the session is still a descendant:
when its parent dies it becomes the keeper's child.

Why a keeper and not `PR_SET_PDEATHSIG` in a `preexec_fn` of the agent itself: the death
signal reaches only the direct child, and an agent's own children (tools, shells, `node`
grandchildren) would keep working; a signal handler cannot be installed in an agent we do
not write; and `preexec_fn` is unsafe in a process with threads (the Worker has some). Why
not cgroups (`systemd-run --scope`, cgroup.kill): the most thorough, but needs a delegated
cgroup that most machines and containers do not give a user process. The keeper costs one
Python start per agent start (`-S`, stdlib only: 10-20 ms measured, where the SDK's
`import acp` alone takes several hundred) and one sleeping process.

The death signal fires when the *thread* that forked the keeper exits: both asyncio's
loops spawn from the loop thread (CPython's `subprocess.Popen` in `_make_subprocess_transport`,
uvloop's `uv_spawn` in `UVProcess._init`), and the Worker's loop runs in its main thread,
which lives as long as the Worker.

This module imports only the standard library: the Worker imports it for the /proc helpers,
and the keeper runs it as a script, without `site`.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
MARK_ENV = "AGENTPOST_AGENT_GROUP"  # a random marker per Worker run, in every agent's env
GRACE = 2.0  # seconds between SIGTERM and SIGKILL
KILL_WAIT = 10.0  # seconds the keeper keeps SIGKILLing; past that it says so and exits
WORKER_GONE = signal.SIGUSR1  # the death signal; also "end everything now" from the Worker
_STOP = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_WAITED = {signal.SIGCHLD, signal.SIGIO, WORKER_GONE, *_STOP}  # SIGIO: a line on the fence
_RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)  # ignored by Python; SIG_DFL again for the agent


def supported() -> bool:
    """The keeper's guarantees need Linux: prctl, /proc and pidfds."""
    return sys.platform.startswith("linux")


def prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def forbid_dumping() -> bool:
    """Make this process not dumpable (Linux; False elsewhere, where nothing is done).

    The kernel then lets no other process of our uid that is not root ptrace us or open
    our /proc/<pid>/environ, mem, maps or fd: the agent, which runs as the same user, can
    no longer read the token there (docs/connect.md "What the agent can reach"). It is the
    flag, not `os.environ.pop`, that protects the environment: /proc/<pid>/environ shows the
    block the process was started with, which unsetenv never changes. Nothing is inherited:
    `exec` resets the flag, so the keeper and the agent stay ordinary processes.
    """
    if not supported():
        return False
    prctl(PR_SET_DUMPABLE, 0)
    return True


# -- /proc ----------------------------------------------------------------------------------


class Proc:
    """One line of /proc/<pid>/stat, the fields we need."""

    __slots__ = ("pid", "state", "ppid", "pgid", "sid", "start")

    def __init__(self, pid: int, state: str, ppid: int, pgid: int, sid: int, start: int) -> None:
        self.pid, self.state, self.ppid, self.pgid, self.sid, self.start = (
            pid, state, ppid, pgid, sid, start
        )


def proc(pid: int) -> Proc | None:
    """The process `pid` as /proc says now; None when there is none (or it is a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2 :].split()
    # fields[0] is field 3 of proc(5): state, ppid, pgrp, session, …, starttime (22)
    found = Proc(pid, fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[3]),
                 int(fields[19]))
    return None if found.state in ("Z", "X") else found


def processes() -> list[Proc]:
    """Every live process /proc shows (zombies left out)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            found = proc(int(name))
            if found is not None:
                out.append(found)
    return out


def has_marker(pid: int, marker: str) -> bool:
    """True when the environment `pid` was started with holds `MARK_ENV=marker`."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:  # gone, or not ours to read
        return False
    return f"{MARK_ENV}={marker}".encode() in env.split(b"\0")


def signal_if(pid: int, sig: int, still: Callable[[Proc], bool]) -> bool:
    """Send `sig` to `pid` if `still(its /proc entry)`, checked after a pidfd pins the
    process, so a pid recycled since the caller looked is never signalled."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except OSError:  # no pidfds (Linux < 5.3): the check and the kill are microseconds apart
        fd = -1
    try:
        found = proc(pid)
        if found is None or not still(found):
            return False
        if fd >= 0:
            signal.pidfd_send_signal(fd, sig)
        else:
            os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False
    finally:
        if fd >= 0:
            os.close(fd)


# -- the keeper -----------------------------------------------------------------------------


class _Keeper:
    def __init__(self, agent_argv: list[str], fence: socket.socket | None = None) -> None:
        self.me = os.getpid()
        self.agent_argv = agent_argv
        self.agent = 0
        self.status: int | None = None
        self.fence = fence
        self.until: float | None = None  # no line yet: not fenced
        self.stopped = False
        self._pending = b""

    def ours(self, p: Proc) -> bool:
        return p.pid != self.me and self.me in (p.ppid, p.pgid, p.sid)

    def everything(self) -> list[Proc]:
        """Every process of our session or group, and every descendant of the keeper: a
        tool that left the group with `setsid` while its parent lives is one too."""
        live = processes()
        children: dict[int, list[Proc]] = {}
        for p in live:
            children.setdefault(p.ppid, []).append(p)
        found = {p.pid: p for p in live if self.ours(p)}
        todo = [self.me, *found]
        while todo:
            for child in children.get(todo.pop(), ()):
                if child.pid not in found and child.pid != self.me:
                    found[child.pid] = child
                    todo.append(child.pid)
        return list(found.values())

    def signal_all(self, sig: int) -> None:
        for p in self.everything():
            signal_if(p.pid, sig, _same_start(p.start))

    def reap(self) -> bool:
        """Reap what has exited (keeping the agent's status); True while children remain."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.agent:
                self.status = status

    def end(self, grace: float) -> None:
        """SIGTERM and `grace` seconds (unless 0 or the Worker dies meanwhile), then
        SIGKILL until no descendant is left. A group stopped by the fence gets no grace:
        resumed, it would work on after its lease may have passed."""
        if self.stopped:
            grace = 0
        deadline = time.monotonic() + grace
        if grace > 0:
            self.signal_all(signal.SIGTERM)
            while self.reap():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                got = signal.sigtimedwait(_WAITED, left)
                if got is not None and got.si_signo == WORKER_GONE:
                    break
        deadline = time.monotonic() + KILL_WAIT
        while self.reap():
            if time.monotonic() > deadline:  # e.g. stuck in the kernel (state D)
                stuck = " ".join(str(p.pid) for p in self.everything())
                sys.stderr.write(f"agentpost keeper: processes did not end: {stuck}\n")
                return
            self.signal_all(signal.SIGKILL)
            signal.sigtimedwait({signal.SIGCHLD}, 0.05)

    # -- the fence ----------------------------------------------------------------------

    def tell(self, line: str) -> None:
        """One line to the Worker; lost when its end is gone or full (it is only said)."""
        if self.fence is not None:
            try:
                self.fence.send(line.encode() + b"\n")
            except OSError:
                pass

    def read_fence(self) -> None:
        """Take every `until T` line the Worker wrote (the socket is non-blocking)."""
        while self.fence is not None:
            try:
                data = self.fence.recv(4096)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:  # the Worker closed its end: the last T stands
                self.fence.close()
                self.fence = None
                return
            self._pending += data
            *lines, self._pending = self._pending.split(b"\n")
            for line in lines:
                word, _, value = line.decode(errors="replace").partition(" ")
                try:
                    until = float(value)
                except ValueError:
                    continue
                if word == "until" and until == until:  # not NaN
                    self.until = until

    def apply_fence(self) -> None:
        if self.until is None:
            return
        if not self.stopped and time.monotonic() >= self.until:
            self.signal_all(signal.SIGSTOP)
            self.stopped = True
            self.tell(f"stopped {self.until!r}")
        elif self.stopped and time.monotonic() < self.until:
            self.signal_all(signal.SIGCONT)
            self.stopped = False
            self.tell("resumed")

    def wait_for(self) -> float:
        """Seconds to wait for a signal: at most 1 s, less when the fence falls sooner."""
        if self.until is None or self.stopped:
            return 1.0
        return max(0.0, min(1.0, self.until - time.monotonic()))

    def run(self, worker: int) -> int:
        signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        prctl(PR_SET_PDEATHSIG, WORKER_GONE)
        if os.getppid() != worker:  # the Worker died before the death signal was set
            return 1
        if self.fence is not None:  # a line arriving raises SIGIO, which we wait for
            fd = self.fence.fileno()
            os.set_inheritable(fd, False)  # the agent never holds it
            self.fence.setblocking(False)
            fcntl.fcntl(fd, fcntl.F_SETOWN, self.me)
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
            self.read_fence()
        try:
            self.agent = _spawn(self.agent_argv)
        except OSError as exc:
            sys.stderr.write(f"agentpost keeper: cannot start {self.agent_argv[0]!r}: {exc}\n")
            return 127
        found = proc(self.agent)
        self.tell(f"agent {self.agent} {found.start if found is not None else 0}")
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)  # the agent alone holds the pipes: its EOF is the Worker's EOF
        os.dup2(null, 1)
        os.close(null)
        while self.status is None:
            self.read_fence()
            self.apply_fence()
            got = signal.sigtimedwait(_WAITED, self.wait_for())
            if got is None and os.getppid() != worker:  # a belt to the death signal
                got_signo = int(WORKER_GONE)
            else:
                got_signo = got.si_signo if got is not None else 0
            if got_signo == WORKER_GONE:
                self.end(0)
                return -signal.SIGKILL if self.status is None else _code(self.status)
            if got_signo in _STOP:
                self.end(GRACE)
                return -signal.SIGTERM if self.status is None else _code(self.status)
            self.reap()
        self.end(GRACE)  # the agent exited by itself: the rest of its processes go too
        return _code(self.status)


def _same_start(start: int) -> Callable[[Proc], bool]:
    return lambda p: p.start == start


def _spawn(argv: list[str]) -> int:
    """fork and exec `argv` with no signal blocked and none ignored that the Worker did
    not ignore (as `subprocess` does; glibc's posix_spawn would leave its own internal
    signals ignored in the agent). An exec that fails is an `OSError` here."""
    r, w = os.pipe()  # both close on exec
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            for sig in _RESTORED:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, ())
            os.execvp(argv[0], argv)
        except BaseException as exc:
            why = (exc.errno, exc.strerror) if isinstance(exc, OSError) else (0, repr(exc))
            os.write(w, f"{why[0]} {why[1]}".encode())
        finally:
            os._exit(127)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        failed = f.read()
    if failed:
        os.waitpid(pid, 0)
        errno, _, text = failed.decode(errors="replace").partition(" ")
        raise OSError(int(errno) if errno.isdigit() else 0, text)
    return pid


def _code(status: int) -> int:
    return os.waitstatus_to_exitcode(status)


def _exit(code: int) -> None:
    sys.stderr.flush()
    if code < 0:  # die of the agent's signal, so the Worker sees the same status
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if -code != signal.SIGKILL:
            signal.signal(-code, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {-code})
        os.kill(os.getpid(), -code)
        code = 128 - code
    os._exit(code)


def command(
    python: str, agent_argv: Iterable[str], worker: int, fence: int | None = None
) -> list[str]:
    """The argv that runs `agent_argv` under a keeper for the Worker `worker`; `fence`: the
    fd (passed to the keeper) of its end of the fence's socket pair."""
    fenced = [] if fence is None else ["--fence", str(fence)]
    return [python, "-S", os.path.abspath(__file__), "--worker", str(worker), *fenced, "--",
            *agent_argv]


def main(argv: list[str]) -> int:
    args = argv[1:]
    fence: socket.socket | None = None
    if len(args) >= 4 and args[0] == "--worker" and args[2] == "--fence":
        fence = socket.socket(fileno=int(args[3]))
        args = args[:2] + args[4:]
    if len(args) < 4 or args[0] != "--worker" or args[2] != "--":
        sys.stderr.write("usage: keeper.py --worker PID [--fence FD] -- AGENT [ARG…]\n")
        return 2
    return _Keeper(args[3:], fence).run(int(args[1]))


if __name__ == "__main__":
    _exit(main(sys.argv))
