"""The keeper: the small parent between the Worker and its agent (DESIGN.md §6 "The Worker
owns its agent's processes"), and the one module that calls `prctl` (Linux only): the
keeper's own calls, and the Worker's `forbid_dumping` (its token stays with it).

The Worker spawns `python -S keeper.py --worker <pid> -- <agent argv…>` as the leader of
a new session (its process group and session id are its pid). The keeper
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
  same signal it died of, so the Worker sees what it saw before the keeper existed.
"Everything" is every process of the keeper's session or group and every child of the
keeper (subreaped descendants included), signalled through a pidfd after a re-check, so a
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
import os
import signal
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
_WAITED = {signal.SIGCHLD, WORKER_GONE, *_STOP}
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
    def __init__(self, agent_argv: list[str]) -> None:
        self.me = os.getpid()
        self.agent_argv = agent_argv
        self.agent = 0
        self.status: int | None = None

    def ours(self, p: Proc) -> bool:
        return p.pid != self.me and self.me in (p.ppid, p.pgid, p.sid)

    def signal_all(self, sig: int) -> None:
        for p in processes():
            if self.ours(p):
                signal_if(p.pid, sig, self.ours)

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
        SIGKILL until no descendant is left."""
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
                stuck = " ".join(str(p.pid) for p in processes() if self.ours(p))
                sys.stderr.write(f"agentpost keeper: processes did not end: {stuck}\n")
                return
            self.signal_all(signal.SIGKILL)
            signal.sigtimedwait({signal.SIGCHLD}, 0.05)

    def run(self, worker: int) -> int:
        signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        prctl(PR_SET_PDEATHSIG, WORKER_GONE)
        if os.getppid() != worker:  # the Worker died before the death signal was set
            return 1
        try:
            self.agent = _spawn(self.agent_argv)
        except OSError as exc:
            sys.stderr.write(f"agentpost keeper: cannot start {self.agent_argv[0]!r}: {exc}\n")
            return 127
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)  # the agent alone holds the pipes: its EOF is the Worker's EOF
        os.dup2(null, 1)
        os.close(null)
        while self.status is None:
            got = signal.sigtimedwait(_WAITED, 1.0)
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


def command(python: str, agent_argv: Iterable[str], worker: int) -> list[str]:
    """The argv that runs `agent_argv` under a keeper for the Worker `worker`."""
    return [python, "-S", os.path.abspath(__file__), "--worker", str(worker), "--", *agent_argv]


def main(argv: list[str]) -> int:
    if len(argv) < 5 or argv[1] != "--worker" or argv[3] != "--":
        sys.stderr.write("usage: keeper.py --worker PID -- AGENT [ARG…]\n")
        return 2
    return _Keeper(argv[4:]).run(int(argv[2]))


if __name__ == "__main__":
    _exit(main(sys.argv))
