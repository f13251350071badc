"""The hot routes without the framework: `POST /v1/rooms/{room}/messages` and
`POST /v1/rooms/{room}/media` straight from ASGI.

Starlette's router, middleware stack and `Request` cost ~16 µs a request of ~200 (issue
14). This path takes the post routes' requests from the ASGI scope before Starlette sees
them and runs the very same handlers (`messages.message_post`, `messages.media_post`): the
same checks in the same order, the same errors (`error_response`), the same metrics and
in-progress gauge. Every other request, and anything unusual about these (another method,
a root path), goes to Starlette as before; the routes stay in `app.ROUTES`, so OpenAPI and
405s are unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from agentpost.core.errors import AgentpostError, Code
from agentpost.hub.decode import receive_body
from agentpost.hub.errors import error_response
from agentpost.hub.routes.messages import media_post, message_post
from agentpost.hub.state import Hub

log = logging.getLogger("agentpost.hub")

_PREFIX = "/v1/rooms/"
MESSAGES = "/messages"
MEDIA = "/media"


def post_room(scope: Scope) -> tuple[str, str] | None:
    """The room and route (`MESSAGES` or `MEDIA`) of a `POST /v1/rooms/{room}/messages` or
    `…/media` request, else None ({room} is one path segment, as Starlette matches it)."""
    if scope["method"] != "POST" or scope.get("root_path"):
        return None
    path: str = scope["path"]
    if not path.startswith(_PREFIX):
        return None
    if path.endswith(MESSAGES):
        room, route = path[len(_PREFIX) : -len(MESSAGES)], MESSAGES
    elif path.endswith(MEDIA):
        room, route = path[len(_PREFIX) : -len(MEDIA)], MEDIA
    else:
        return None
    return (room, route) if room and "/" not in room else None


_WANTED = frozenset(
    (b"authorization", b"idempotency-key", b"content-length", b"content-type",
     b"agentpost-worker-fence", b"agentpost-cause")
)


def _headers(scope: Scope) -> dict[bytes, str]:
    """The first of each header these routes read, as Starlette's `Headers.get`."""
    out: dict[bytes, str] = {}
    for name, value in scope["headers"]:
        if name in _WANTED and name not in out:
            out[name] = value.decode("latin-1")
    return out


async def _chunks(receive: Receive) -> AsyncIterator[bytes]:
    """The body as it arrives, as Starlette's `Request.stream`."""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ClientDisconnect()
        body: bytes = message.get("body", b"")
        if body:
            yield body
        if not message.get("more_body", False):
            return


async def post(hub: Hub, room_id: str, route: str, scope: Scope, receive: Receive, send: Send) -> None:
    h = _headers(scope)
    authorization = h.get(b"authorization", "")
    key = h.get(b"idempotency-key")
    declared = h.get(b"content-length")
    fence = h.get(b"agentpost-worker-fence")
    try:
        if route == MESSAGES:
            response = await message_post(
                hub, room_id, authorization, key, lambda cap: receive_body(receive, declared, cap),
                fence, h.get(b"agentpost-cause"),
            )
        else:
            response = await media_post(
                hub, room_id, authorization, key, h.get(b"content-type", ""), declared,
                _chunks(receive), fence, h.get(b"agentpost-cause"),
            )
    except AgentpostError as exc:
        response = error_response(exc)
    except ClientDisconnect:
        log.info("client left during POST %s; nothing was posted", scope["path"])
        response = Response(status_code=400)  # as `handle_client_gone`; nobody reads it
    except Exception:
        log.exception("internal error on POST %s", scope["path"])
        response = error_response(AgentpostError(Code.INTERNAL, "internal error; it was logged"))
    await response(scope, receive, send)
