"""The hot route without the framework: `POST /v1/rooms/{room}/messages` straight from ASGI.

Starlette's router, middleware stack and `Request` cost ~16 µs a request of ~200 (issue
14). This path takes the post route's request from the ASGI scope before Starlette sees it
and runs the very same handler (`messages.message_post`): the same checks in the same
order, the same errors (`error_response`), the same metrics and in-progress gauge. Every
other request, and anything unusual about this one (another method, a root path), goes
to Starlette as before; the route stays in `app.ROUTES`, so OpenAPI and 405s are
unchanged.
"""

from __future__ import annotations

import logging

from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from agentpost.core.errors import AgentpostError, Code
from agentpost.hub.decode import receive_body
from agentpost.hub.errors import error_response
from agentpost.hub.routes.messages import message_post
from agentpost.hub.state import Hub

log = logging.getLogger("agentpost.hub")

_PREFIX = "/v1/rooms/"
_SUFFIX = "/messages"
_START, _END = len(_PREFIX), -len(_SUFFIX)


def post_room(scope: Scope) -> str | None:
    """The room of a `POST /v1/rooms/{room}/messages` request, else None ({room} is one
    path segment, as Starlette matches it)."""
    if scope["method"] != "POST" or scope.get("root_path"):
        return None
    path: str = scope["path"]
    if not (path.startswith(_PREFIX) and path.endswith(_SUFFIX)):
        return None
    room = path[_START:_END]
    return room if room and "/" not in room else None


async def post_message(hub: Hub, room_id: str, scope: Scope, receive: Receive, send: Send) -> None:
    authorization = ""
    key: str | None = None
    declared: str | None = None
    for name, value in scope["headers"]:  # the first of each, as Starlette's Headers.get
        if name == b"authorization":
            if not authorization:
                authorization = value.decode("latin-1")
        elif name == b"idempotency-key":
            if key is None:
                key = value.decode("latin-1")
        elif name == b"content-length" and declared is None:
            declared = value.decode("latin-1")
    try:
        response = await message_post(
            hub, room_id, authorization, key, lambda cap: receive_body(receive, declared, cap)
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
