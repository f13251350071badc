"""File reservations over HTTP (docs/reservations.md): reserve, list, check, renew, release.
HTTP only: the rules live in `hub/reservations.py`, the key rules in `hub/idempotency.py`."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from agentpost.core.errors import Code, RequestError
from agentpost.hub import auth, idempotency, reservations
from agentpost.hub.decode import read_json
from agentpost.hub.errors import json_response
from agentpost.hub.idempotency import Created
from agentpost.hub.routes.messages import answer_response
from agentpost.hub.schemas import (
    CheckIn,
    ConflictList,
    RenewIn,
    ReservationList,
    ReservationReply,
    ReserveIn,
)
from agentpost.hub.state import Hub, hub_of
from agentpost.hub.submit import submit
from agentpost.store.engine import Tx
from agentpost.store.models import Member, Reservation


async def _caller(request: Request, hub: Hub) -> Member:
    who = await auth.member(request, hub)
    if request.path_params["ws"] != who.workspace_name:
        raise RequestError(Code.NO_WORKSPACE, f"no workspace {request.path_params['ws']!r}")
    return who


def _key(request: Request) -> str | None:
    return idempotency.check_key(request.headers.get(idempotency.HEADER))


def _reply(status: int, r: Reservation) -> Created:
    body = msgspec.json.encode(ReservationReply(reservation=reservations.out(r)))
    return Created(status, body, None, None)


async def reserve(request: Request) -> Response:
    hub = hub_of(request)
    who = await _caller(request, hub)
    key = _key(request)
    body = await read_json(request, ReserveIn, hub.config.max_json_bytes)
    project = reservations.project_of(body.project)
    paths = reservations.patterns(body.paths)
    normalized = {
        "project": project,
        "paths": paths,
        "exclusive": body.exclusive,
        "ttl_seconds": body.ttl_seconds,
        "reason": body.reason,
        "room": body.room,
    }

    def create(tx: Tx) -> Created:
        r = reservations.reserve(
            tx,
            who,
            project,
            paths,
            body.exclusive,
            body.ttl_seconds * 1000,
            body.reason,
            body.room,
        )
        return _reply(201, r)

    fp = idempotency.fingerprint("reserve", who.workspace_id, normalized) if key else None
    ans = await submit(hub, "reserve", who.id, key, fp, create)
    return answer_response(ans, key is not None)


async def list_reservations(request: Request) -> Response:
    hub = hub_of(request)
    who = await _caller(request, hub)
    raw = request.query_params.get("project")
    project = reservations.project_of(raw) if raw is not None else None
    found = await hub.engine.read(lambda db: reservations.live(db, who.workspace_id, project))
    out = ReservationList(reservations=[reservations.out(r) for r in found])
    return json_response(200, msgspec.json.encode(out))


async def check(request: Request) -> Response:
    hub = hub_of(request)
    who = await _caller(request, hub)
    body = await read_json(request, CheckIn, hub.config.max_json_bytes)
    project = reservations.project_of(body.project)
    paths = reservations.concrete(body.paths)
    found = await hub.engine.read(lambda db: reservations.check(db, who, project, paths))
    return json_response(200, msgspec.json.encode(ConflictList(conflicts=found)))


async def renew(request: Request) -> Response:
    hub = hub_of(request)
    who = await auth.member(request, hub)
    key = _key(request)
    rid = request.path_params["reservation"]
    body = await read_json(request, RenewIn, hub.config.max_json_bytes)

    def create(tx: Tx) -> Created:
        return _reply(200, reservations.renew(tx, who, rid, body.ttl_seconds * 1000))

    fp = idempotency.fingerprint("reservation_renew", rid, {"ttl": body.ttl_seconds})
    ans = await submit(hub, "reservation_renew", who.id, key, fp if key else None, create)
    return answer_response(ans, key is not None)


async def release(request: Request) -> Response:
    """The holder's release, or a force-release by the admin token or an agent's owner."""
    hub = hub_of(request)
    rid = request.path_params["reservation"]
    if auth.is_admin(request, hub.admin_hash):
        r = await hub.engine.write(lambda tx: reservations.release(tx, None, rid))
        return json_response(200, _reply(200, r).body)
    who = await auth.member(request, hub)
    key = _key(request)

    def create(tx: Tx) -> Created:
        return _reply(200, reservations.release(tx, who, rid))

    fp = idempotency.fingerprint("reservation_release", rid, {}) if key else None
    ans = await submit(hub, "reservation_release", who.id, key, fp, create)
    return answer_response(ans, key is not None)
