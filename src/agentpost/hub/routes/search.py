"""`GET /v1/search?q=&room=&sender=&before=&limit=`: full-text search over the caller's
rooms, newest first (docs/delivery.md)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from agentpost.core.search import QueryInvalid
from agentpost.hub import auth
from agentpost.hub import search as service
from agentpost.hub.errors import json_response
from agentpost.hub.routes.events import int_param
from agentpost.hub.state import hub_of
from agentpost.store.search import Filters


async def search(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    params = request.query_params
    q = params.get("q")
    if q is None or not q.strip():
        raise QueryInvalid("q is required: the words to search for")
    f = Filters(
        member_id=member.id,
        room_id=params.get("room") or None,
        sender=params.get("sender") or None,
        before=params.get("before") or None,
        limit=int_param(request, "limit", service.DEFAULT_LIMIT, 1, service.MAX_LIMIT),
    )
    body = await hub.engine.read(lambda db: service.find(db, member, q, f))
    return json_response(200, body)
