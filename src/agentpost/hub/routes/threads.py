"""Threads (docs/threads.md): ensure the one thread, and read a key's send state. HTTP only;
the rules live in `hub/threads.py` (ensure) and `hub/idempotency.py` (keys)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from agentpost.core.clock import rfc3339
from agentpost.core.errors import Code, RequestError
from agentpost.hub import auth, idempotency, threads
from agentpost.hub.decode import read_json
from agentpost.hub.errors import json_response
from agentpost.hub.schemas import SendOut, ThreadIn, ThreadOut
from agentpost.hub.state import hub_of
from agentpost.store import events
from agentpost.store.engine import Tx


async def ensure_thread(request: Request) -> Response:
    hub = hub_of(request)
    who = await auth.member(request, hub)
    ws_name = request.path_params["ws"]
    body = await read_json(request, ThreadIn, hub.config.max_json_bytes)
    owner = body.owner or who.name

    def ensure(tx: Tx) -> threads.Ensured:
        return threads.ensure(tx, ws_name, who, body.name, owner)

    got = await hub.engine.write(ensure)
    out = ThreadOut(
        thread_id=got.room.id,
        workspace=got.workspace,
        name=got.room.name,
        owner=got.room.owner or owner,
        created=got.created,
    )
    return json_response(201 if got.created else 200, msgspec.json.encode(out))


async def send_state(request: Request) -> Response:
    hub = hub_of(request)
    who = await auth.member(request, hub)
    raw = request.query_params.get("key")
    if raw is None:
        raise RequestError(Code.INVALID_REQUEST, "the query needs `key`", field="key")
    key = idempotency.check_key(raw)
    assert key is not None
    rec = await hub.idempotency.send_state(who.id, key, request.path_params["room"])
    event = None
    if rec.event_id is not None:
        found = await hub.engine.read(lambda db: events.by_id(db, rec.event_id or ""))
        event = msgspec.Raw(found[2]) if found is not None else None
    out = SendOut(
        key=rec.key,
        room=rec.room_id,
        state=rec.state,
        status=rec.status,
        event=event,
        response=msgspec.Raw(rec.body),
        recorded_at=rfc3339(rec.created_at),
    )
    return json_response(200, msgspec.json.encode({"send": out}))
