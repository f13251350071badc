"""`/v1/worker/lease`: the one Worker of an agent member (docs/architecture.md#one-worker-per-agent,
docs/connect.md). HTTP only; the rules live in `hub/leases.py`."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from agentpost.hub import auth, leases
from agentpost.hub.decode import read_json
from agentpost.hub.errors import json_response
from agentpost.hub.schemas import (
    FenceIn,
    LeaseCurrent,
    LeaseIn,
    LeaseOut,
    LeaseReleased,
    LeaseReply,
    LeaseTaken,
)
from agentpost.hub.state import hub_of
from agentpost.store import leases as lease_rows
from agentpost.store.models import Lease


def _lease_ms(request: Request) -> int:
    return int(hub_of(request).config.worker_lease_seconds * 1000)


def _out(lease: Lease, lease_ms: int) -> LeaseOut:
    return LeaseOut(
        **msgspec.structs.asdict(leases.holder_out(lease)), lease_seconds=lease_ms / 1000
    )


async def take(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    body = await read_json(request, LeaseIn, hub.config.max_json_bytes)
    ms = _lease_ms(request)
    new, replaced = await hub.engine.write(
        lambda tx: leases.take(
            tx, member, body.worker_id, body.host, body.pid, body.takeover, ms, body.last_fence
        )
    )
    out = LeaseTaken(
        lease=_out(new, ms),
        replaced=leases.holder_out(replaced) if replaced is not None else None,
    )
    return json_response(200, msgspec.json.encode(out))


async def renew(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    body = await read_json(request, FenceIn, hub.config.max_json_bytes)
    ms = _lease_ms(request)
    lease = await hub.engine.write(lambda tx: leases.renew(tx, member, body.fence, ms))
    return json_response(200, msgspec.json.encode(LeaseReply(lease=_out(lease, ms))))


async def release(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    body = await read_json(request, FenceIn, hub.config.max_json_bytes)
    await hub.engine.write(lambda tx: leases.release(tx, member, body.fence))
    return json_response(200, msgspec.json.encode(LeaseReleased(released=True)))


async def current(request: Request) -> Response:
    """The caller's lease as the hub sees it (`connect status`), or null."""
    hub = hub_of(request)
    member = await auth.member(request, hub)
    found = await hub.engine.read(lambda db: lease_rows.get(db, member.id))
    shown = leases.holder_out(found) if found is not None and found.fence > 0 else None
    return json_response(200, msgspec.json.encode(LeaseCurrent(lease=shown)))
