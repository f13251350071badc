"""Running the hub: uvicorn on one loopback port, the "listening on" line (README.md "Five
minutes with the hub").

Everything that can go wrong at start (the data dir, another hub on it, the port, the
database) is tried before uvicorn runs, so a mistake ends in one line naming it
(`StartError`), never a traceback.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import os
import socket
import sqlite3
import sys

import uvicorn
from starlette.applications import Starlette

from agentpost.core.errors import AgentpostError
from agentpost.hub.app import admin_token_hash, create_app
from agentpost.hub.config import HubConfig
from agentpost.hub.datalock import DataDirBusy, DataDirLock, lock_path, needs_lock
from agentpost.hub.protocol import protocol_class
from agentpost.hub.state import Hub
from agentpost.store.engine import Engine
from agentpost.store.files import UMASK, private_dir
from agentpost.store.open import describe, open_engine

log = logging.getLogger("agentpost.hub")


class StartError(Exception):
    """The hub cannot start as configured; the message says what to change."""


def bind(host: str, port: int) -> socket.socket:
    """Bind before serving so `--port 0` can print the port the kernel picked."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: the event loop turns Nagle off (TCP_NODELAY) only on sockets
    # it knows are TCP; without it each response body waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise StartError(
                f"port {port} on {host} is in use (another hub?): stop it, or pick another "
                "port with --port (0 picks a free one)"
            ) from exc
        raise StartError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.set_inheritable(True)
    return sock


def _prepare(config: HubConfig) -> tuple[DataDirLock | None, socket.socket, Engine]:
    """The data dir (0700), its lock (SQLite: docs/architecture.md#one-hub-per-data-dir), the
    admin token, the port and the open database."""
    lock = None
    try:
        private_dir(config.data_dir)
        if needs_lock(config.db_url):
            lock = DataDirLock(config.data_dir, lock_path(config.db_url, config.data_dir))
        admin_token_hash(config.data_dir)
    except DataDirBusy as exc:
        raise StartError(str(exc)) from exc
    except OSError as exc:
        if lock is not None:
            lock.release()
        raise StartError(
            f"cannot use the data dir {config.data_dir}: {exc.strerror or exc} "
            "(pick another with --data or AGENTPOST_HOME)"
        ) from exc
    try:
        sock = bind(config.host, config.port)
    except StartError:
        if lock is not None:
            lock.release()
        raise
    try:
        return lock, sock, open_engine(config.db_url, config.data_dir)
    except AgentpostError as exc:
        sock.close()
        raise StartError(f"cannot open the database: {exc.message}") from exc
    except (OSError, sqlite3.Error) as exc:
        sock.close()
        where = describe(config.db_url, config.data_dir)
        raise StartError(f"cannot open the database ({where}): {exc}") from exc


# Young-generation collections every 50,000 net allocations instead of 700: requests in
# flight are no longer promoted and walked again and again (issue 14: GC was ~9 % of the
# loop's CPU and made the p99). The older generations keep their usual ratios.
GC_THRESHOLDS = (50_000, 20, 100)


def tune_gc() -> None:
    """Once the hub is up: collect, freeze what start-up made (modules, app, store) so no
    collection walks it again, and collect the young generation less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: Starlette, url: str) -> None:
        super().__init__(config)
        self.app = app
        self.url = url

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            tune_gc()
            print(f"agentpost hub listening on {self.url}", flush=True)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """End streams and long polls first, so a graceful shutdown does not wait on them:
        uvicorn lets requests in progress finish, and a stream never does by itself."""
        hub: Hub | None = getattr(self.app.state, "hub", None)
        if hub is not None:
            hub.notifier.close()
        stuck = asyncio.create_task(self._drop_stuck_readers())
        try:
            await super().shutdown(sockets)
        finally:
            stuck.cancel()

    async def _drop_stuck_readers(self) -> None:
        """Close connections whose reader stopped reading: their stream cannot finish its
        last write, and a reader resumes from `Last-Event-ID` anyway. uvicorn reports that
        as the client having gone. Two shapes: a write still paused on a full buffer
        (dropped at once), and a response that has ended but whose closing transport still
        holds bytes nobody reads (dropped once its buffer has not moved for
        `_STUCK_AFTER` seconds, so a slow but live reader still gets its last bytes)."""
        seen: dict[int, tuple[int, float]] = {}
        loop = asyncio.get_running_loop()
        while True:
            now = loop.time()
            for conn in list(self.server_state.connections):
                flow = getattr(conn, "flow", None)
                transport = getattr(conn, "transport", None)
                if transport is None:
                    continue
                if flow is not None and flow.write_paused:
                    transport.abort()
                    continue
                if not transport.is_closing():
                    continue
                pending = transport.get_write_buffer_size()
                if pending == 0:
                    continue
                size, since = seen.setdefault(id(conn), (pending, now))
                if size != pending:
                    seen[id(conn)] = (pending, now)
                elif now - since >= _STUCK_AFTER:
                    transport.abort()
            await asyncio.sleep(0.05)


_STUCK_AFTER = 0.5


def serve(config: HubConfig, log_level: str = "warning") -> None:
    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Whatever the hub writes from here on (blobs, temp files) is the user's alone.
    os.umask(UMASK)
    try:
        lock, sock, engine = _prepare(config)
    except StartError as exc:
        print(f"agentpost serve: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)
    port = sock.getsockname()[1]
    host = f"[{config.host}]" if ":" in config.host else config.host
    config.bound_url = f"http://{host}:{port}"  # URLs the hub writes, without --public-url
    if lock is not None:
        lock.record(f"http://{host}:{port}")  # held until this process ends
    app = create_app(config, engine)
    ucfg = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=3,
        # The hub reads neither the client's address nor the scheme, so the X-Forwarded-*
        # parsing uvicorn would do for every request from 127.0.0.1 buys nothing.
        proxy_headers=False,
        http=protocol_class(),
    )
    server = _Server(ucfg, app, f"http://{host}:{port}")
    if os.environ.get("AGENTPOST_ADMIN_TOKEN"):
        token_note = "admin token from AGENTPOST_ADMIN_TOKEN"
    else:
        token_note = f"admin token in {config.data_dir / 'admin.token'}"
    print(f"agentpost data dir {config.data_dir}; {token_note}", flush=True)
    print(f"agentpost database: {describe(config.db_url, config.data_dir)}", flush=True)
    if _has("uvloop"):
        import uvloop

        uvloop.run(server.serve(sockets=[sock]))
    else:
        asyncio.run(server.serve(sockets=[sock]))


def _has(module: str) -> bool:
    """uvicorn[standard] brings uvloop; run without it where it is missing."""
    import importlib.util

    return importlib.util.find_spec(module) is not None
