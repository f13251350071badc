"""Running the hub: uvicorn on one loopback port, the "listening on" line (§3 Starting)."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys

import uvicorn

from agentpost.hub.app import create_app
from agentpost.hub.config import HubConfig

log = logging.getLogger("agentpost.hub")


def bind(host: str, port: int) -> socket.socket:
    """Bind before serving so `--port 0` can print the port the kernel picked."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: the event loop turns Nagle off (TCP_NODELAY) only on sockets
    # it knows are TCP; without it each response body waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, url: str) -> None:
        super().__init__(config)
        self.url = url

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            print(f"agentpost hub listening on {self.url}", flush=True)


def serve(config: HubConfig, log_level: str = "warning") -> None:
    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    config.data_dir.mkdir(parents=True, exist_ok=True)
    sock = bind(config.host, config.port)
    port = sock.getsockname()[1]
    host = f"[{config.host}]" if ":" in config.host else config.host
    token_note = config.data_dir / "admin.token"
    app = create_app(config)
    ucfg = uvicorn.Config(
        app,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=3,
        http="httptools" if _has("httptools") else "h11",
    )
    server = _Server(ucfg, f"http://{host}:{port}")
    print(f"agentpost data dir {config.data_dir}; admin token in {token_note}", flush=True)
    if _has("uvloop"):
        import uvloop

        uvloop.run(server.serve(sockets=[sock]))
    else:
        asyncio.run(server.serve(sockets=[sock]))


def _has(module: str) -> bool:
    """uvicorn[standard] brings uvloop and httptools; run without them where they're missing."""
    import importlib.util

    return importlib.util.find_spec(module) is not None
