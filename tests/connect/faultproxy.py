"""A small real HTTP proxy that injects faults between a Worker and a real hub.

Everything is forwarded to the hub as it came (streams too: the inbox's SSE passes through
unbuffered), except requests that match a fault the test armed: the proxy then answers for
the hub (a 5xx, a 409 `running`), or forwards and loses the answer (the hub acted, the
Worker hears nothing before its timeout), or forwards and strips a response header (a keyed
2xx without the `Idempotency-Status` echo), or forwards and edits the JSON answer, or holds a request until the test lets it go.
It runs uvicorn on a thread of the test process, on a free 127.0.0.1 port.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from hubproc import poll

HOP = {"host", "content-length", "connection", "transfer-encoding", "keep-alive"}


@dataclass
class Fault:
    """What to do to the next `times` requests with `method` whose path matches `path`
    (and that carry an Idempotency-Key, when `keyed`)."""

    method: str
    path: str
    answer: tuple[int, dict[str, Any]] | None = None  # answer this instead of the hub
    hold: threading.Event | None = None  # forward only once the test sets this
    lose_answer: float = 0.0  # forward, then hold the hub's answer this long
    strip_header: str | None = None  # forward, drop this response header
    edit_json: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    keyed: bool = True
    times: int = 1  # -1: every matching request, until disarmed
    hits: list[str] = field(default_factory=list)

    def matches(self, request: Request) -> bool:
        return (
            self.times != 0
            and request.method == self.method
            and re.fullmatch(self.path, request.url.path) is not None
            and (not self.keyed or "idempotency-key" in request.headers)
        )


def five_hundred() -> tuple[int, dict[str, Any]]:
    return 503, {"error": {"code": "storage_unavailable", "message": "injected by the proxy"}}


def running() -> tuple[int, dict[str, Any]]:
    body = {"code": "idempotency_in_flight", "message": "injected by the proxy", "state": "running"}
    return 409, {"error": body}


POSTS = r"/v1/rooms/[^/]+/(messages|media)"
MEDIA = r"/v1/rooms/[^/]+/media"
MESSAGES = r"/v1/rooms/[^/]+/messages"


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.faults: list[Fault] = []
        self.permanent: list[Fault] = []  # kept by `disarm`, matched after the armed ones
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def arm(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def disarm(self) -> None:
        with self._lock:
            self.faults = []

    def _take(self, request: Request) -> Fault | None:
        with self._lock:
            for f in [*self.faults, *self.permanent]:
                if f.matches(request):
                    if f.times > 0:
                        f.times -= 1
                    f.hits.append(request.url.path)
                    return f
        return None

    async def _forward(self, request: Request) -> Response:
        fault = self._take(request)
        if fault is not None and fault.answer is not None:
            status, body = fault.answer
            return Response(json.dumps(body), status, media_type="application/json")
        if fault is not None and fault.hold is not None:
            assert await asyncio.to_thread(fault.hold.wait, 60), "the test never let it go"
        client: httpx.AsyncClient = request.app.state.client
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP]
        upstream = client.build_request(
            request.method,
            request.url.path,
            params=request.url.query,
            headers=headers,
            content=await request.body(),
        )
        resp = await client.send(upstream, stream=True)
        out_headers = {k: v for k, v in resp.headers.items() if k.lower() not in HOP}
        if resp.headers.get("content-type", "").startswith("text/event-stream"):
            return StreamingResponse(
                resp.aiter_raw(),
                resp.status_code,
                out_headers,
                background=BackgroundTask(resp.aclose),
            )
        content = b"".join([chunk async for chunk in resp.aiter_raw()])
        await resp.aclose()
        if fault is not None:
            if fault.lose_answer:
                await asyncio.sleep(fault.lose_answer)
            if fault.strip_header:
                out_headers = {
                    k: v for k, v in out_headers.items() if k.lower() != fault.strip_header.lower()
                }
            if fault.edit_json is not None:
                content = json.dumps(fault.edit_json(json.loads(content))).encode()
        return Response(content, resp.status_code, out_headers)

    def start(self) -> FaultProxy:
        app = Starlette(
            routes=[
                Route(
                    "/{path:path}",
                    self._forward,
                    methods=["GET", "POST", "PUT", "DELETE", "PATCH"],
                )
            ]
        )
        app.state.client = httpx.AsyncClient(base_url=self.upstream, timeout=None)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan="off",
            ws="none",
            http="h11",
            loop="asyncio",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        server = self._server

        async def serve() -> None:
            try:
                await server.serve(sockets=[sock])
            finally:
                await app.state.client.aclose()

        self._thread = threading.Thread(
            target=lambda: asyncio.run(serve()), name="fault-proxy", daemon=True
        )
        self._thread.start()
        poll(lambda: server.started, timeout=10)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
