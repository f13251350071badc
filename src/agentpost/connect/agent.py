"""The agent process under the Worker (docs/connect.md): one standing connection, restarted
with backoff when it exits, and one ACP session per Session key, made lazily.

Every `session/update` is handed to the Turn that owns its session; every request the
agent makes (permissions, `_…` extensions) arrives here, on the one standing connection.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentpost.connect.acp import AgentConnection, AgentFailed, MethodNotFound, Update
from agentpost.connect.permissions import PermissionPolicy
from agentpost.connect.sessions import SessionKey

log = logging.getLogger("agentpost.connect.agent")

BACKOFF_START = 0.5
BACKOFF_MAX = 30.0
STABLE_AFTER = 10.0

ExtHandler = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class AgentSupervisor:
    def __init__(
        self,
        argv: list[str],
        cwd: Path,
        permissions: PermissionPolicy,
        ext: ExtHandler | None = None,
        client_meta: Callable[[], dict[str, Any]] | None = None,
        before_restart: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.argv = argv
        self.cwd = cwd
        self.permissions = permissions
        self._ext = ext
        self._client_meta = client_meta or (lambda: {})
        self._before_restart = before_restart
        self.conn: AgentConnection | None = None
        self.ready = asyncio.Event()
        self.generation = 0
        self.restarts = 0
        self.last_failure = ""
        self.last_exit: int | None = None
        self.sessions: dict[SessionKey, str] = {}
        self._listeners: dict[str, Callable[[Update], None]] = {}
        self._stopping = False
        self._session_lock = asyncio.Lock()

    # -- the process ------------------------------------------------------------------

    async def run(self) -> None:
        """Keep the agent running until `stop`; restart with backoff when it exits."""
        backoff = BACKOFF_START
        while not self._stopping:
            conn = AgentConnection(
                self.argv, self.cwd, self._on_update, self._on_permission, self._on_ext
            )
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
            self.ready.set()
            log.info("agent started: pid %s (%s)", conn.pid, " ".join(self.argv))
            code = await conn.wait()
            self.ready.clear()
            self.conn = None
            self.last_exit = code
            why = conn.cut_reason or f"exit code {code}"
            tail = conn.stderr_tail().strip().splitlines()[-5:]
            self.last_failure = why
            await conn.close()
            if self._stopping:
                return
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

    async def stop(self) -> None:
        self._stopping = True
        conn = self.conn
        if conn is not None:
            await conn.close()

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
        self, conn: AgentConnection, key: SessionKey, meta: dict[str, Any]
    ) -> str:
        async with self._session_lock:
            found = self.sessions.get(key)
            if found is not None and conn is self.conn:
                return found
            session_id = await conn.new_session(meta)
            self.sessions[key] = session_id
            log.info("session %s for %s", session_id, key.label())
            return session_id

    def listen(self, session_id: str, on_update: Callable[[Update], None]) -> None:
        self._listeners[session_id] = on_update

    def unlisten(self, session_id: str) -> None:
        self._listeners.pop(session_id, None)

    # -- what the agent asks of us ----------------------------------------------------

    def _on_update(self, update: Update) -> None:
        listener = self._listeners.get(update.session_id)
        if listener is not None:
            listener(update)

    async def _on_permission(self, session_id: str, title: str, options: list[Any]) -> str | None:
        return self.permissions.choose(session_id, title, options)

    async def _on_ext(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if self._ext is None:
            log.info("agent asked for unknown extension _%s: method not found", method)
            raise MethodNotFound(method)
        return await self._ext(method, params)
