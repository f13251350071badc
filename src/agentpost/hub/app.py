"""The hub's ASGI application: routes, error mapping, and the lifespan that opens the
store, writes the admin token and runs the key sweep (docs/api.md)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentpost.core.clock import now_ms
from agentpost.core.errors import AgentpostError, Code
from agentpost.core.ids import new_token, token_hash
from agentpost.hub import reservations as reservation_rules
from agentpost.hub.a2a import push as a2a_push
from agentpost.hub.a2a import routes as a2a_routes
from agentpost.hub.ag2 import routes as ag2_routes
from agentpost.hub.auth import FORGET, TokenCache
from agentpost.hub.blobs import BlobStore
from agentpost.hub.config import HubConfig
from agentpost.hub.errors import (
    error_response,
    handle_agentpost_error,
    handle_client_gone,
    handle_unknown,
)
from agentpost.hub.idempotency import Idempotency
from agentpost.hub.memory import Trimmer
from agentpost.hub.metrics import HubMetrics
from agentpost.hub.notify import ALL, Notifier
from agentpost.hub.presence import Presence
from agentpost.hub.retention import RetentionSweep
from agentpost.hub.routes import (
    admin,
    delivery,
    events,
    export,
    inbox,
    leases,
    members,
    messages,
    meta,
    relations,
    reservations,
    rooms,
    search,
    thin,
    threads,
    web,
)
from agentpost.hub.routing import fences
from agentpost.hub.routing.router import LlmSettings, Outbound
from agentpost.hub.state import Hub
from agentpost.hub.streams import StreamSlots
from agentpost.store.engine import Engine
from agentpost.store.files import private_dir
from agentpost.store.open import open_engine

log = logging.getLogger("agentpost.hub")

# The post route first: Starlette tries routes in order, and it is the hot path.
ROUTES = [
    Route("/v1/rooms/{room}/messages", messages.post_message, methods=["POST"]),
    Route("/healthz", meta.healthz, methods=["GET"]),
    Route("/metrics", meta.metrics, methods=["GET"]),
    Route("/openapi.json", meta.openapi, methods=["GET"]),
    Route("/v1/capabilities", meta.capabilities, methods=["GET"]),
    Route("/v1/admin/workspaces", admin.create_workspace, methods=["POST"]),
    Route("/v1/admin/workspaces", admin.list_workspaces, methods=["GET"]),
    Route("/v1/admin/workspaces/{ws}/members", admin.add_member, methods=["POST"]),
    Route("/v1/admin/workspaces/{ws}/members", admin.list_members, methods=["GET"]),
    Route("/v1/admin/workspaces/{ws}/members/{name}/token", admin.reissue_token, methods=["POST"]),
    Route("/v1/admin/workspaces/{ws}/members/{name}/owner", admin.set_owner, methods=["PUT"]),
    Route("/v1/admin/workspaces/{ws}/members/{name}", admin.remove_member, methods=["DELETE"]),
    Route("/v1/admin/workspaces/{ws}/retention", admin.get_workspace_retention, methods=["GET"]),
    Route("/v1/admin/workspaces/{ws}/retention", admin.set_workspace_retention, methods=["PUT"]),
    Route("/v1/workspaces/{ws}/rooms", rooms.create_room, methods=["POST"]),
    Route("/v1/workspaces/{ws}/rooms", rooms.list_rooms, methods=["GET"]),
    Route("/v1/rooms/{room}", rooms.get_room, methods=["GET"]),
    Route("/v1/rooms/{room}", rooms.update_settings, methods=["PATCH"]),
    Route("/v1/rooms/{room}/retention", rooms.get_retention, methods=["GET"]),
    Route("/v1/rooms/{room}/retention", rooms.set_retention, methods=["PUT"]),
    Route("/v1/rooms/{room}/participants/{name}", rooms.set_participant, methods=["PUT", "DELETE"]),
    Route("/v1/rooms/{room}/archive", rooms.set_archived, methods=["POST"]),
    Route("/v1/rooms/{room}/read", rooms.mark_read, methods=["POST"]),
    Route("/v1/rooms/{room}/unarchive", rooms.set_archived, methods=["POST"]),
    Route("/v1/rooms/{room}/media", messages.post_media, methods=["POST"]),
    Route("/v1/workspaces/{ws}/threads/ensure", threads.ensure_thread, methods=["POST"]),
    Route("/v1/rooms/{room}/sends", threads.send_state, methods=["GET"]),
    Route("/v1/rooms/{room}/events", events.list_events, methods=["GET"]),
    Route("/v1/rooms/{room}/stream", events.stream, methods=["GET"]),
    Route("/v1/rooms/{room}/stream-ticket", events.stream_ticket, methods=["POST"]),
    Route("/v1/events/{event}", events.get_event, methods=["GET"]),
    Route("/v1/rooms/{room}/events/{event}/delivery", delivery.delivery_state, methods=["GET"]),
    Route("/v1/rooms/{room}/events/{event}/edits", relations.post_edit, methods=["POST"]),
    Route("/v1/rooms/{room}/events/{event}/reactions", relations.post_reaction, methods=["POST"]),
    Route(
        "/v1/rooms/{room}/events/{event}/redactions", relations.post_redaction, methods=["POST"]
    ),
    Route("/v1/events/{event}/delivery", delivery.delivery_state, methods=["GET"]),
    Route("/v1/media/{media}", messages.get_media, methods=["GET"]),
    Route("/v1/search", search.search, methods=["GET"]),
    Route("/v1/inbox", inbox.get_inbox, methods=["GET"]),
    Route("/v1/inbox/stream", inbox.inbox_stream, methods=["GET"]),
    Route("/v1/inbox/ack", inbox.ack, methods=["POST"]),
    Route("/v1/me", inbox.me, methods=["GET"]),
    Route("/v1/worker/lease", leases.take, methods=["POST"]),
    Route("/v1/worker/lease", leases.current, methods=["GET"]),
    Route("/v1/worker/lease/renew", leases.renew, methods=["POST"]),
    Route("/v1/worker/lease/release", leases.release, methods=["POST"]),
    Route("/v1/workspaces/{ws}/reservations", reservations.reserve, methods=["POST"]),
    Route("/v1/workspaces/{ws}/reservations", reservations.list_reservations, methods=["GET"]),
    Route("/v1/workspaces/{ws}/reservations/check", reservations.check, methods=["POST"]),
    Route("/v1/reservations/{reservation}/renew", reservations.renew, methods=["POST"]),
    Route("/v1/reservations/{reservation}", reservations.release, methods=["DELETE"]),
    Route("/v1/workspaces/{ws}/members", members.list_members, methods=["GET"]),
    Route("/v1/workspaces/{ws}/members/{name}", members.get_member, methods=["GET"]),
    Route("/v1/rooms/{room}/cancel", messages.cancel, methods=["POST"]),
    *export.ROUTES,
    Route("/", web.index, methods=["GET"]),
    Route("/web/{asset}", web.asset, methods=["GET"]),
]


def admin_token_hash(data_dir: Path) -> tuple[str, Path | None]:
    """The admin token's hash; writes `<data>/admin.token` (0600) on first start unless
    `AGENTPOST_ADMIN_TOKEN` overrides it. Returns (hash, path written or read)."""
    override = os.environ.get("AGENTPOST_ADMIN_TOKEN")
    if override:
        return token_hash(override), None
    path = data_dir / "admin.token"
    if not path.exists():
        token = new_token()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
            f.flush()
            os.fsync(f.fileno())
    return token_hash(path.read_text().strip()), path


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return error_response(AgentpostError(Code.NOT_FOUND, f"no route {request.url.path}"))
    if exc.status_code == 405:
        # A 405 lists every method the path takes; Starlette names only the first route's.
        allowed = {
            m for r in ROUTES if r.path_regex.match(request.url.path) for m in r.methods or ()
        }
        return error_response(
            AgentpostError(Code.METHOD_NOT_ALLOWED, "method not allowed"),
            {"Allow": ", ".join(sorted(allowed))},
        )
    return error_response(AgentpostError(Code.INVALID_REQUEST, str(exc.detail)))


def _woken(hub: Hub) -> Callable[[str], None]:
    """What a commit's wake-up key does here: a removal's or reissue's drops the member from
    the token cache; every other wakes its streams and long polls. After a lost NOTIFY
    connection (`*`) nothing cached can be trusted either."""

    def woken(key: str) -> None:
        if key.startswith(FORGET):
            hub.tokens.forget(key.removeprefix(FORGET))
            return
        if key == ALL:
            hub.tokens.clear()
        hub.notifier.notify(key)

    return woken


async def _sweeper(hub: Hub) -> None:
    kept = RetentionSweep(hub)
    trimmer = Trimmer()
    if not trimmer.enabled:
        log.info("freed memory is not trimmed (AGENTPOST_MALLOC_TRIM=0, or no malloc_trim)")
    while True:
        await asyncio.sleep(hub.config.sweep_interval_seconds)
        await _sweep_once(hub, kept)
        if trimmer.due():  # what the interval and its sweep freed goes back to the system
            await asyncio.to_thread(trimmer.give_back)


async def _sweep_once(hub: Hub, kept: RetentionSweep) -> None:
    try:
        n = await hub.idempotency.sweep()
        hub.metrics.keys_swept.inc(n)
    except AgentpostError as exc:
        log.warning("key sweep skipped: %s", exc.message)
    try:
        while await hub.engine.write(lambda tx: fences.forget_origins(tx, now_ms())) >= 1000:
            pass  # in batches, so the sweep never holds the writer long
    except AgentpostError as exc:
        log.warning("origin sweep skipped: %s", exc.message)
    try:
        while await hub.engine.write(reservation_rules.sweep) >= 200:
            pass  # in batches, as the origins above
    except AgentpostError as exc:
        log.warning("reservation sweep skipped: %s", exc.message)
    try:
        swept = await kept.sweep()
    except AgentpostError as exc:
        log.warning("retention sweep skipped: %s", exc.message)
        return
    if swept.events or swept.media or swept.blobs or swept.removed:
        log.info(
            "retention: %d events and %d files expired, %d held, %d blobs freed, "
            "%d tombstones removed",
            swept.events, swept.media, swept.held, swept.blobs, swept.removed,
        )


class _Edge:
    """The outermost layer of our own: counts the HTTP requests being handled
    (`agentpost_requests_in_progress`) and answers an unknown exception with a logged 500
    `internal` (docs/architecture.md#hub). Starlette's own last-resort handler answers too, but then
    re-raises, and uvicorn closes the keep-alive connection: the client's next, valid
    request would fail with it. Here the error ends with its answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hub = getattr(scope["app"].state, "hub", None)
        started = False

        async def send_tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        if hub is not None:
            hub.metrics.in_progress.inc()
        try:
            await self.app(scope, receive, send_tracked)
        except Exception as exc:
            if started:
                raise  # half a response went out: only closing the connection can end it
            response = await handle_unknown(Request(scope), exc)
            await response(scope, receive, send)
        finally:
            if hub is not None:
                hub.metrics.in_progress.dec()


class HubApp(Starlette):
    """Starlette, with the post routes' requests taken before its stack (routes/thin.py)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            found = thin.post_room(scope)
            hub: Hub | None = getattr(self.state, "hub", None) if found is not None else None
            if found is not None and hub is not None:
                hub.metrics.in_progress.inc()
                try:
                    await thin.post(hub, found[0], found[1], scope, receive, send)
                finally:
                    hub.metrics.in_progress.dec()
                return
        await super().__call__(scope, receive, send)


def create_app(config: HubConfig, engine: Engine | None = None) -> Starlette:
    """The hub app; the store opens in the lifespan (or `engine` is used as given)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        private_dir(config.data_dir)
        admin_hash, token_path = admin_token_hash(config.data_dir)
        if token_path is not None:
            log.info("admin token: %s", token_path)
        eng = engine or open_engine(config.db_url, config.data_dir)
        streams = StreamSlots(config.max_streams_per_member)
        hub = Hub(
            config=config,
            engine=eng,
            notifier=Notifier(),
            idempotency=Idempotency(eng, config.key_ttl_seconds, config.key_wait_seconds),
            blobs=BlobStore(config.blob_dir, config.blob_free_grace_seconds),
            metrics=HubMetrics(),
            admin_hash=admin_hash,
            tokens=TokenCache(shared=eng.shared),
            http=Outbound(),
            router_settings=LlmSettings.from_env(),
            streams=streams,
            presence=Presence(
                eng,
                config.presence_online_seconds,
                config.presence_flush_seconds,
                streams.holders,
            ),
        )
        if hub.router_settings is None:
            log.info("no AGENTPOST_ROUTER_URL: rooms with the llm router stop (wake no one)")
        hub.metrics.watch_in_flight(hub.idempotency.in_flight)
        hub.metrics.watch_as_data(hub.engine.written_as_data)
        eng.on_notify(_woken(hub))
        app.state.hub = hub
        sweeper = asyncio.create_task(_sweeper(hub))
        flusher = asyncio.create_task(hub.presence.run())
        pusher = asyncio.create_task(a2a_push.run(hub))
        try:
            yield
        finally:
            for task in (sweeper, flusher, pusher):
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            try:  # a clean stop keeps the last seconds of presence too
                await hub.presence.flush()
            except AgentpostError as exc:
                log.warning("last presence flush lost: %s", exc.message)
            await hub.http.aclose()
            await eng.close()

    # The AG2 relay profile is a foreign wire (docs/architecture.md#ag2-relay-profile): mounted
    # beside ours, not in ROUTES, so it is no part of our OpenAPI document (docs/ag2.md documents
    # it).
    return HubApp(
        routes=[
            *ROUTES,
            Mount(ag2_routes.PREFIX, routes=ag2_routes.ROUTES),
            Mount(a2a_routes.PREFIX, routes=a2a_routes.ROUTES),
        ],
        lifespan=lifespan,
        middleware=[Middleware(_Edge)],
        exception_handlers={
            AgentpostError: handle_agentpost_error,
            HTTPException: _http_error,
            ClientDisconnect: handle_client_gone,
        },
    )
