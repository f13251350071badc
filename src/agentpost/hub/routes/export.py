"""Exports over HTTP (docs/api.md "Export"): a room's export for its participants, a
workspace's for the operator, and the files of that workspace export. The rules are in
hub/export.py; here are the query, the headers and the response that streams.

An export is held like a stream (hub/streams.py): it takes one of its member's stream
slots while it runs, so one member cannot tie up the hub with exports either.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from agentpost.core import export as fmt
from agentpost.core.errors import AgentpostError, Code, RequestError
from agentpost.hub import auth, export
from agentpost.hub.routes import messages
from agentpost.hub.routes.rooms import visible_room
from agentpost.hub.state import hub_of
from agentpost.store import media, members
from agentpost.store.engine import Db
from agentpost.store.models import MediaRow

log = logging.getLogger("agentpost.hub")

# The operator's exports share one slot count, as one member's would.
OPERATOR = "admin"


class _Export(StreamingResponse):
    """An export as it is read from the store; its stream slot is given back however it
    ends (done, reader gone, cancelled), even when its body never started."""

    def __init__(
        self,
        content: AsyncIterator[bytes],
        media_type: str,
        filename: str,
        release: Callable[[], None],
    ) -> None:
        ascii_name = filename.encode("ascii", "replace").decode().replace("?", "_")
        disposition = f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(filename)}"
        super().__init__(
            content,
            media_type=media_type,
            headers={
                "Content-Disposition": disposition,
                "Cache-Control": "no-store",
                "X-Content-Type-Options": "nosniff",
                "X-Accel-Buffering": "no",
            },
        )
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


async def export_room(request: Request) -> Response:
    """`GET /v1/rooms/{room}/export?format=jsonl|md&files=paths|embed`: a participant's
    export, refused exactly as reading the room's events is."""
    hub = hub_of(request)
    member = await auth.member(request, hub)
    format, files = export.check_options(
        request.query_params.get("format"), request.query_params.get("files")
    )
    plan = await export.room_export(hub, member, request.path_params["room"], format, files)
    release = hub.streams.take(member.id)
    return _Export(plan.chunks(), fmt.MEDIA_TYPES[format], plan.filename, release)


async def export_workspace(request: Request) -> Response:
    """`GET /v1/admin/workspaces/{ws}/export`: every room of the workspace, for the
    operator (the one route where the admin token reads a conversation; docs/api.md)."""
    hub = hub_of(request)
    auth.require_admin(request, hub.admin_hash)
    plan = await export.workspace_export(hub, request.path_params["ws"])
    release = hub.streams.take(OPERATOR)
    # A warning, so that it is in the log at the default level: the one read of
    # conversations the admin token may make (docs/api.md "The operator's export").
    log.warning("the operator exports workspace %s (%d rooms)", plan.workspace, len(plan.rooms))
    filename = fmt.safe_file_name(plan.workspace, "workspace") + ".jsonl"
    return _Export(plan.chunks(), fmt.MEDIA_TYPES[fmt.JSONL], filename, release)


async def workspace_media(request: Request) -> Response:
    """`GET /v1/admin/workspaces/{ws}/media/{media}`: a file of the workspace, for the
    operator's export, served as `GET /v1/media/{id}` serves it to a participant."""
    hub = hub_of(request)
    auth.require_admin(request, hub.admin_hash)
    ws_name = request.path_params["ws"]
    media_id = request.path_params["media"]

    def read(db: Db) -> MediaRow:
        ws = members.workspace_by_name(db, ws_name)
        if ws is None:
            raise RequestError(Code.NO_WORKSPACE, f"no workspace {ws_name!r}")
        row = media.by_id(db, media_id)
        try:
            room = visible_room(db, row.room_id, None) if row is not None else None
        except AgentpostError:
            room = None
        if row is None or room is None or room.workspace_id != ws.id:
            raise RequestError(Code.MEDIA_NOT_FOUND, f"no media {media_id!r} in {ws_name!r}")
        return messages.servable(row)

    return await messages.download(hub, await hub.engine.read(read))


ROUTES = [
    Route("/v1/rooms/{room}/export", export_room, methods=["GET"]),
    Route("/v1/admin/workspaces/{ws}/export", export_workspace, methods=["GET"]),
    Route("/v1/admin/workspaces/{ws}/media/{media}", workspace_media, methods=["GET"]),
]
