"""`GET /v1/rooms/{room}/events/{event}/delivery` and `GET /v1/events/{event}/delivery`:
who got an event, read it, acked it, answered it (docs/delivery.md)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from agentpost.hub import auth
from agentpost.hub.delivery import state_of
from agentpost.hub.errors import json_response
from agentpost.hub.state import hub_of


async def delivery_state(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    event_id = request.path_params["event"]
    room_id = request.path_params.get("room")
    out = await hub.engine.read(lambda db: state_of(db, member, event_id, room_id))
    return json_response(200, msgspec.json.encode({"delivery": out}))
