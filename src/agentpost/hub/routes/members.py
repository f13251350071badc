"""`GET /v1/workspaces/{ws}/members[/{name}]`: who is in the caller's workspace, their kind,
owner and status, and their presence (docs/api.md, docs/presence.md). Any member may ask about their
own workspace; any other workspace is `no_workspace`, whether it exists or not."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from agentpost.core.clock import now_ms
from agentpost.core.errors import Code, RequestError
from agentpost.hub import auth, leases
from agentpost.hub.errors import json_response
from agentpost.hub.presence import when
from agentpost.hub.schemas import MemberSeen
from agentpost.hub.state import Hub, hub_of
from agentpost.store import leases as lease_rows
from agentpost.store import members, presence
from agentpost.store.engine import Db
from agentpost.store.models import Lease, Member


def member_seen(
    hub: Hub, m: Member, stored: int | None, now: int, lease: Lease | None = None
) -> MemberSeen:
    last = hub.presence.last_seen(m.id, stored)
    return MemberSeen(
        id=m.id,
        name=m.name,
        kind=m.kind,
        status=m.status,
        owner=m.owner,
        owner_id=m.owner_id,
        online=m.status == "active" and hub.presence.online(last, now),
        last_seen=when(last),
        worker=leases.holder_out(lease, now) if lease is not None and lease.fence > 0 else None,
    )


async def _caller(request: Request, hub: Hub) -> Member:
    who = await auth.member(request, hub)
    if request.path_params["ws"] != who.workspace_name:
        raise RequestError(Code.NO_WORKSPACE, f"no workspace {request.path_params['ws']!r}")
    return who


async def list_members(request: Request) -> Response:
    """Every member of the workspace by name, removed ones too (with their status)."""
    hub = hub_of(request)
    who = await _caller(request, hub)

    def read(db: Db) -> tuple[list[Member], dict[str, int], dict[str, Lease]]:
        return (
            members.list_members(db, who.workspace_id),
            presence.of_workspace(db, who.workspace_id),
            lease_rows.of_workspace(db, who.workspace_id),
        )

    found, stored, held = await hub.engine.read(read)
    now = now_ms()
    out = {
        "workspace": who.workspace_name,
        "members": [member_seen(hub, m, stored.get(m.id), now, held.get(m.id)) for m in found],
    }
    return json_response(200, msgspec.json.encode(out))


async def get_member(request: Request) -> Response:
    """One member of the caller's workspace: a Worker asks who owns an agent
    (docs/architecture.md#identity), and its own presence as the hub sees it (docs/presence.md)."""
    hub = hub_of(request)
    who = await _caller(request, hub)
    name = request.path_params["name"]

    def read(db: Db) -> tuple[Member | None, int | None, Lease | None]:
        found = members.member_by_name(db, who.workspace_id, name)
        if found is None:
            return None, None, None
        return found, presence.of_member(db, found.id), lease_rows.get(db, found.id)

    found, stored, lease = await hub.engine.read(read)
    if found is None:
        raise RequestError(Code.MEMBER_NOT_FOUND, f"no member {name!r}")
    seen = member_seen(hub, found, stored, now_ms(), lease)
    return json_response(200, msgspec.json.encode({"member": seen}))
