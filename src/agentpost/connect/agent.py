"""The agent process under the Worker (docs/connect.md): one standing connection, restarted
with backoff when it exits, and one ACP session per Session key, made lazily.

`AgentProcesses` owns every process the agent is made of
(docs/architecture.md#agent-processes): it starts the agent under a keeper
(`connect/keeper.py`) in a session of its own, records the group in the workspace, feeds the
keeper the lease's deadline (docs/architecture.md#fenced-by-time), ends the whole group on
stop, on restart, on a cut and when the keeper dies, and ends at the next start whatever an
earlier Worker left behind.

Every `session/update` is handed to the Turn that owns its session; every request the
agent makes (permissions, `_…` extensions) arrives here, on the one standing connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from agentpost.connect import keeper
from agentpost.connect.acp import (
    AgentConnection,
    AgentFailed,
    MethodNotFound,
    PermissionAsk,
    SessionFailed,
    Update,
)
from agentpost.connect.permissions import PermissionDecision, PermissionPolicy
from agentpost.connect.sessions import SessionKey
from agentpost.connect.workspace import write_atomic

log = logging.getLogger("agentpost.connect.agent")

BACKOFF_START = 0.5
BACKOFF_MAX = 30.0
STABLE_AFTER = 10.0

ExtHandler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
SWEEP_WAIT = 5.0  # seconds the start waits for an earlier Worker's survivors to be gone


class AgentProcesses:
    """The owner of the agent's processes: it starts them (under a keeper on Linux, as the
    leader of a new session), records the group in the workspace (`agent-group.json`),
    ends the whole group, and at a Worker's start ends what an earlier Worker left.

    What is ours: the keeper recorded (same pid, same start time, our marker in its
    environment); any process whose environment carries the recorded run's marker
    (`AGENTPOST_AGENT_GROUP`, inherited by the agent and what it starts) and that started
    after that Worker did; and any member of the recorded session or group when one of
    those is in it (a group id is never shared by two live groups). Nothing else is touched.
    """

    def __init__(self, record: Path | None) -> None:
        self.record = record
        self.marker = secrets.token_hex(16)
        self.keeper = keeper.supported()
        me = keeper.proc(os.getpid()) if self.keeper else None
        self._since = me.start if me is not None else 0
        self.until: float | None = None  # the fence: monotonic time the agent may work to
        self._fence: socket.socket | None = None  # our end, to the current keeper
        self._their_end: socket.socket | None = None  # the keeper's, until it is spawned
        self._read = b""
        self._reading: asyncio.AbstractEventLoop | None = None
        self.agent_pid: int | None = None
        self._group: int | None = None

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        return {**(os.environ if base is None else base), keeper.MARK_ENV: self.marker}

    def command(self, argv: list[str]) -> list[str]:
        if not self.keeper:
            return argv
        self._close_fence()
        self._fence, self._their_end = socket.socketpair()
        return keeper.command(sys.executable, argv, os.getpid(), self._their_end.fileno())

    def pass_fds(self) -> tuple[int, ...]:
        """The fd the keeper gets besides its pipes: its end of the fence."""
        return () if self._their_end is None else (self._their_end.fileno(),)

    def started(self, pid: int) -> None:
        """Record the group just started (its id is `pid`, the session leader's), and
        give the keeper the lease's deadline as it stands."""
        if self._their_end is not None:
            self._their_end.close()  # the keeper holds it now
            self._their_end = None
        self.agent_pid = None
        self._group = pid
        if self._fence is not None:
            self._fence.setblocking(False)
            self._reading = asyncio.get_running_loop()
            self._reading.add_reader(self._fence.fileno(), self.heard)
            if self.until is not None:
                self.fence(self.until)
        found = keeper.proc(pid) if self.keeper else None
        self._write({"pgid": pid, "keeper_pid": pid,
                     "keeper_start": found.start if found is not None else None})

    def fence(self, until: float) -> None:
        """The agent may work until `until` (monotonic), unless told a later time: the
        Worker renewed its lease (docs/architecture.md#fenced-by-time). A keeper that stopped the
        group resumes it."""
        self.until = until
        if self._fence is None:
            return
        try:
            self._fence.send(f"until {until!r}\n".encode())
        except OSError as exc:  # the keeper is gone (it is ended and restarted) or stuck
            log.warning("the keeper was not told the lease's new deadline: %s", exc)

    def heard(self) -> None:
        """Read what the keeper said (its agent's pid; that it stopped or resumed the group)."""
        while self._fence is not None:
            try:
                data = self._fence.recv(4096)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:  # the keeper is gone; `after_keeper` closes our end
                self._stop_reading()
                return
            self._read += data
            *lines, self._read = self._read.split(b"\n")
            for line in lines:
                self._said(line.decode(errors="replace").split())

    def _said(self, words: list[str]) -> None:
        if words[:1] == ["agent"] and len(words) == 3 and words[1].isdigit():
            self.agent_pid = int(words[1])
        elif words[:1] == ["stopped"]:
            log.warning(
                "the keeper stopped the agent's processes (SIGSTOP): the lease was not renewed "
                "in time and could pass to a standby; they resume if this Worker still holds "
                "it, and are ended if it does not"
            )
        elif words[:1] == ["resumed"]:
            log.info("the keeper resumed the agent's processes: the lease is still ours")

    def _stop_reading(self) -> None:
        if self._reading is not None and self._fence is not None:
            self._reading.remove_reader(self._fence.fileno())
        self._reading = None

    def _close_fence(self) -> None:
        self._stop_reading()
        for end in (self._fence, self._their_end):
            if end is not None:
                end.close()
        self._fence = self._their_end = None
        self._read = b""

    def _write(self, group: dict[str, Any]) -> None:
        if self.record is None:
            return
        data = {"marker": self.marker, "worker_pid": os.getpid(), "since": self._since, **group}
        try:
            write_atomic(self.record, json.dumps(data).encode())
        except OSError as exc:
            log.error("cannot record the agent's process group in %s: %s", self.record, exc)

    def kill(self, pid: int) -> None:
        """End the group now (a cut): the keeper SIGKILLs everything, or we do."""
        try:
            if self.keeper:
                os.kill(pid, keeper.WORKER_GONE)
            else:
                os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def kill_left(self) -> None:
        """SIGKILL what is left of the last group once its keeper is gone (from any thread):
        a group id is not given to a new process while the group has a member."""
        if self._group is not None:
            _killpg(self._group, signal.SIGKILL)

    async def end(self, proc: asyncio.subprocess.Process) -> None:
        """End the whole group: SIGTERM, `GRACE` seconds, SIGKILL (the keeper does the
        waiting and the SIGKILL of its descendants; this waits for the keeper)."""
        if proc.returncode is None:
            _killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), keeper.GRACE + 3.0)
            except TimeoutError:
                log.error("the agent's group %d did not end in time; SIGKILL", proc.pid)
                _killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        await self.after_keeper(proc.pid)

    async def after_keeper(self, pgid: int) -> None:
        """Once the keeper has exited: end whatever of the agent outlived it. A keeper
        that ended normally left nothing; one killed from outside (kill -9) left the agent
        and its tools running (docs/architecture.md#agent-processes: the Worker ends the whole group
        when the keeper dies). Its group is SIGKILLed, and every process carrying this run's marker
        that started after this Worker (one that left the group included)."""
        self.heard()
        self._close_fence()
        if self.keeper:
            record = {"marker": self.marker, "since": self._since, "pgid": pgid}
            ended = await asyncio.to_thread(_end_survivors, record)
            if ended:
                log.error(
                    "the agent's keeper (pid %d) is gone and left %d processes of the agent "
                    "running: ended them (pids %s)",
                    pgid,
                    len(ended),
                    " ".join(str(p) for p in sorted(ended)),
                )
        _killpg(pgid, signal.SIGKILL)  # what is left of the group (a scrubbed environment)

    def sweep(self) -> None:
        """At start, under the workspace lock: end what an earlier Worker of this workspace
        left running, after checking it is ours; then record this run's marker."""
        if not self.keeper:
            log.warning(
                "agent processes: on %s an agent may outlive a Worker killed with kill -9, "
                "and survivors are not looked for at start (prctl and /proc are Linux-only)",
                sys.platform,
            )
            return
        if self.record is None:
            return
        earlier = _read_record(self.record)
        if earlier is not None and _recorder_lives(earlier):
            # This folder is a copy of a live Worker's (docs/architecture.md#one-worker-per-agent):
            # its agent is that Worker's to end, never ours.
            log.warning(
                "the agent recorded in %s belongs to a Worker that still runs (pid %s): this "
                "folder is a copy of its folder; that agent is left alone",
                self.record,
                earlier.get("worker_pid"),
            )
        elif earlier is not None:
            ended = _end_survivors(earlier)
            if ended:
                log.warning(
                    "ended %d processes left by an earlier Worker's agent (group %s, "
                    "Worker pid %s): pids %s",
                    len(ended),
                    earlier.get("pgid"),
                    earlier.get("worker_pid"),
                    " ".join(str(p) for p in sorted(ended)),
                )
        self._write({})


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _read_record(path: Path) -> dict[str, Any] | None:
    try:
        data: Any = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("%s cannot be read (%s); no survivors looked for", path, exc)
        return None
    marker = data.get("marker") if isinstance(data, dict) else None
    if not isinstance(marker, str) or len(marker) < 16:
        log.warning("%s holds no marker; no survivors looked for", path)
        return None
    return dict(data)


def _survivors(record: dict[str, Any]) -> dict[int, int]:
    """pid → start time of every live process the record shows to be ours."""
    marker = str(record["marker"])
    since = _int(record.get("since")) or 0
    group = _int(record.get("pgid"))
    me = os.getpid()
    live = [p for p in keeper.processes() if p.pid != me]
    marked = {
        p.pid: p.start
        for p in live
        if p.start >= since and keeper.has_marker(p.pid, marker)
    }
    kept = record.get("keeper_pid")
    keeper_ours = any(
        p.pid == kept and p.start == record.get("keeper_start") and p.pid in marked
        for p in live
    )
    members = {p.pid: p.start for p in live if group is not None and group in (p.pgid, p.sid)}
    if keeper_ours or marked.keys() & members.keys():
        return {**marked, **members}
    return marked


def _recorder_lives(record: dict[str, Any]) -> bool:
    """The Worker that wrote `record` runs still: another process, same pid and start."""
    pid = _int(record.get("worker_pid"))
    if pid is None or pid == os.getpid():
        return False
    found = keeper.proc(pid)
    return found is not None and found.start == record.get("since")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _started_at(start: int) -> Callable[[keeper.Proc], bool]:
    return lambda p: p.start == start


def _end_survivors(record: dict[str, Any]) -> set[int]:
    """SIGKILL what `_survivors` finds until none is left (or `SWEEP_WAIT` passed)."""
    ended: set[int] = set()
    deadline = time.monotonic() + SWEEP_WAIT
    while True:
        found = _survivors(record)
        if not found:
            return ended
        for pid, start in found.items():
            if keeper.signal_if(pid, signal.SIGKILL, _started_at(start)):
                ended.add(pid)
        if time.monotonic() > deadline:
            log.error("processes of an earlier Worker's agent did not end: pids %s",
                      " ".join(str(p) for p in sorted(found)))
            return ended
        time.sleep(0.02)  # the kernel is tearing them down: look again


class PermissionWatch(Protocol):
    """What a running Turn tells the policy (the folder its attachments are in, which the
    agent may read) and is told (each decision, to say a refusal in its reply)."""

    @property
    def readable(self) -> Path | None: ...

    def decided(self, ask: PermissionAsk, decision: PermissionDecision) -> None: ...


class AgentSupervisor:
    def __init__(
        self,
        argv: list[str],
        cwd: Path,
        permissions: PermissionPolicy,
        ext: ExtHandler | None = None,
        client_meta: Callable[[], dict[str, Any]] | None = None,
        before_restart: Callable[[], Awaitable[None]] | None = None,
        record: Path | None = None,
    ) -> None:
        self.argv = argv
        self.processes = AgentProcesses(record)
        self.cwd = cwd
        self.permissions = permissions
        self._ext = ext
        self._client_meta = client_meta or (lambda: {})
        self._before_restart = before_restart
        self.conn: AgentConnection | None = None
        self._current: AgentConnection | None = None  # starting or running
        self.ready = asyncio.Event()
        self.generation = 0
        self.restarts = 0
        self.last_failure = ""
        self.last_exit: int | None = None
        self.last_session_error: dict[str, Any] | None = None  # for `connect status`
        self.sessions: dict[SessionKey, str] = {}
        # ACP session id → the binding issued in it (usable only from there,
        # docs/architecture.md#deferred-delivery); kept for the agent process's life, cleared with
        # its sessions at a restart.
        self.bindings: dict[str, str] = {}
        # ACP session id → the event its latest Turn serves (a delivery's cause,
        # docs/architecture.md#cause).
        self.triggers: dict[str, str] = {}
        self._listeners: dict[str, Callable[[Update], None]] = {}
        self._permission_watch: dict[str, PermissionWatch] = {}
        self._stopping = False
        self._session_lock = asyncio.Lock()

    # -- the process ------------------------------------------------------------------

    async def run(self) -> None:
        """Keep the agent running until `stop`; restart with backoff when it exits. However
        this ends (cancelled mid-start included), the agent's whole group ends with it."""
        try:
            await self._run()
        finally:
            if self._current is not None:
                await self._current.close()

    async def _run(self) -> None:
        backoff = BACKOFF_START
        while not self._stopping:
            conn = AgentConnection(
                self.argv,
                self.cwd,
                self._on_update,
                self._on_permission,
                self._on_ext,
                processes=self.processes,
            )
            self._current = conn
            started = time.monotonic()
            try:
                if self.restarts and self._before_restart is not None:
                    await self._before_restart()  # e.g. the Worker's probe, before initialize
                await conn.start(self._client_meta())
            except AgentFailed as exc:
                self.last_failure = str(exc)
                log.error("agent did not start: %s; next try in %.1fs", exc, backoff)
                await conn.close()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
                self.restarts += 1
                continue
            self.conn = conn
            self.generation += 1
            self.sessions.clear()
            self.bindings.clear()
            self.triggers.clear()
            self.ready.set()
            await self._log_started(conn)
            code = await conn.wait()
            # The keeper is gone: should it have been killed from outside, the agent it
            # left runs on; it is ended before anything else (docs/architecture.md#agent-processes).
            if conn.pid is not None:
                await self.processes.after_keeper(conn.pid)
            await conn.drain()  # what it wrote before it went is read, then the close
            self.ready.clear()
            self.conn = None
            self.last_exit = code
            why = conn.cut_reason or f"exit code {code}"
            tail = conn.stderr_tail().strip().splitlines()[-5:]
            await conn.close()
            if self._stopping:  # ended because the Worker stops: no failure of the agent's
                return
            self.last_failure = why
            log.error(
                "agent stopped (%s; %d bytes on stderr; tail: %s)",
                why,
                conn.stderr_bytes,
                " | ".join(tail) or "-",
            )
            if time.monotonic() - started > STABLE_AFTER:
                backoff = BACKOFF_START
            self.restarts += 1
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)

    async def _log_started(self, conn: AgentConnection) -> None:
        """`agent started`, naming the agent's own pid beside its keeper's (the keeper
        says it at once, before the agent could answer initialize; read within 1 s)."""
        argv = " ".join(self.argv)
        if not self.processes.keeper:
            log.info("agent started: pid %s, process group %s (%s)", conn.pid, conn.pid, argv)
            return
        deadline = time.monotonic() + 1.0
        self.processes.heard()
        while self.processes.agent_pid is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
            self.processes.heard()
        log.info(
            "agent started: pid %s, keeper pid %s, process group %s (%s)",
            self.processes.agent_pid or "unknown",
            conn.pid,
            conn.pid,
            argv,
        )

    async def stop(self) -> None:
        self._stopping = True
        conn = self._current
        if conn is not None:
            await conn.close()

    def kill_now(self) -> None:
        """SIGKILL the agent's whole group, from any thread (the Worker ends at once)."""
        conn = self._current
        pid = conn.pid if conn is not None and conn.running() else None
        if pid is not None:  # not reaped yet: the pid is still the keeper's
            self.processes.kill(pid)
        else:  # the keeper is gone: what it left of the group
            self.processes.kill_left()

    def halt(self, reason: str) -> None:
        """End the agent's whole group at once, no grace (this Worker lost its lease: the
        agent must do no more work, docs/architecture.md#fenced-by-time), and restart it no more."""
        self._stopping = True
        conn = self._current
        if conn is not None:
            conn.cut(reason)

    async def wait_ready(self, timeout: float) -> AgentConnection:
        """The live connection; `AgentFailed` (with the last reason) past `timeout`."""
        try:
            await asyncio.wait_for(self.ready.wait(), timeout)
        except TimeoutError:
            raise AgentFailed(self.last_failure or "the agent is not running") from None
        assert self.conn is not None
        return self.conn

    # -- sessions ---------------------------------------------------------------------

    async def session_for(
        self,
        conn: AgentConnection,
        key: SessionKey,
        meta: dict[str, Any],
        directories: list[Path] | None = None,
    ) -> str:
        """The Session's ACP session, opened when first needed; `directories` are the
        folders it may read besides the repo (its attachments)."""
        async with self._session_lock:
            found = self.sessions.get(key)
            if found is not None and conn is self.conn:
                return found
            try:
                session_id = await conn.new_session(meta, directories or [])
            except SessionFailed as exc:
                # Said at once in the Worker's log, with the agent's message (redacted); the
                # room gets the Worker's words and the code (docs/connect.md).
                said = f": {exc.agent_message}" if exc.agent_message else ""
                log.error("%s (for %s)%s", exc, key.label(), said)
                self.last_session_error = {
                    "at": time.time(),
                    "session": key.label(),
                    "error": str(exc),
                    "code": exc.code,
                    "message": exc.agent_message,
                }
                raise
            self.sessions[key] = session_id
            delivery = meta.get("ag2/delivery")
            if isinstance(delivery, dict) and isinstance(delivery.get("binding"), str):
                self.bindings[session_id] = delivery["binding"]  # issued in this session
            log.info("session %s for %s", session_id, key.label())
            return session_id

    def listen(
        self,
        session_id: str,
        on_update: Callable[[Update], None],
        watch: PermissionWatch | None = None,
    ) -> None:
        """The running Turn of `session_id`: its updates, and its permission requests."""
        self._listeners[session_id] = on_update
        if watch is not None:
            self._permission_watch[session_id] = watch

    def unlisten(self, session_id: str) -> None:
        self._listeners.pop(session_id, None)
        self._permission_watch.pop(session_id, None)

    # -- what the agent asks of us ----------------------------------------------------

    def _on_update(self, update: Update) -> None:
        listener = self._listeners.get(update.session_id)
        if listener is not None:
            listener(update)

    async def _on_permission(self, ask: PermissionAsk) -> str | None:
        watch = self._permission_watch.get(ask.session_id)
        decision = self.permissions.choose(ask, watch.readable if watch else None)
        if watch is not None:
            watch.decided(ask, decision)
        return decision.option_id

    async def _on_ext(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self._ext is None:
            log.info("agent asked for unknown extension _%s: method not found", method)
            raise MethodNotFound(method)
        return await self._ext(method, params)
