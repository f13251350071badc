"""`/v1/admin/*`: workspaces and members, with the admin token (docs/api.md)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from agentpost.core.errors import Code, RequestError
from agentpost.core.ids import new_token, token_hash
from agentpost.hub import auth, reservations
from agentpost.hub.decode import read_json
from agentpost.hub.errors import json_response
from agentpost.hub.notify import inbox_key, room_key
from agentpost.hub.schemas import (
    MemberIn,
    MemberOut,
    OwnerIn,
    RetentionEffective,
    RetentionIn,
    RetentionOut,
    RetentionReply,
    WorkspaceIn,
)
from agentpost.hub.state import hub_of
from agentpost.store import members, retention, rooms
from agentpost.store.engine import Db, Tx
from agentpost.store.models import Member, Workspace


def member_out(m: Member) -> MemberOut:
    return MemberOut(
        id=m.id, name=m.name, kind=m.kind, status=m.status, owner=m.owner, owner_id=m.owner_id
    )


async def create_workspace(request: Request) -> Response:
    hub = hub_of(request)
    auth.require_admin(request, hub.admin_hash)
    body = await read_json(request, WorkspaceIn, hub.config.max_json_bytes)
    ws = await hub.engine.write(lambda tx: members.create_workspace(tx, body.name))
    if ws is None:
        raise RequestError(Code.WORKSPACE_EXISTS, f"workspace {body.name!r} exists")
    return json_response(201, msgspec.json.encode({"workspace": {"id": ws.id, "name": ws.name}}))


async def list_workspaces(request: Request) -> Response:
    hub = hub_of(request)
    auth.require_admin(request, hub.admin_hash)
    found = await hub.engine.read(members.list_workspaces)
    return json_response(
        200, msgspec.json.encode({"workspaces": [{"id": w.id, "name": w.name} for w in found]})
    )


async def add_member(request: Request) -> Response:
    hub = hub_of(request)
    auth.require_admin(request, hub.admin_hash)
    ws_name = request.path_params["ws"]
    body = await read_json(request, MemberIn, hub.config.max_json_bytes)
    if body.kind == "human" and body.owner is not None:
        raise RequestError(Code.INVALID_REQUEST, "only agents have an owner", field="$.owner")
    token = new_token()

    def add(tx: Tx) -> Member:
        ws = members.workspace_by_name(tx, ws_name)
        if ws is None:
            raise RequestError(Code.NO_WORKSPACE, f"no workspace {ws_name!r}")
        owner = None if body.owner is None else _owner(tx, ws, body.owner)
        m = members.create_member(tx, ws, body.name, body.kind, owner)
        if m is None:
            raise _exists(tx, ws.id, ws_name, body.name)
        members.add_token(tx, m.id, token_hash(token))
        return m

    m = await hub.engine.write(add)
    return json_response(
        201, msgspec.json.encode({"member": member_out(m), "token": token, "workspace": ws_name})
    )


def _exists(tx: Tx, workspace_id: str, ws_name: str, name: str) -> RequestError:
    """`member_exists`; for a soft-removed member, how to free the name."""
    old = members.member_by_name(tx, workspace_id, name)
    if old is not None and old.status == "removed":
        return RequestError(
            Code.MEMBER_EXISTS,
            f"member {name!r} of {ws_name!r} was removed softly and keeps its name (its "
            "messages still name it); only a hard removal frees the name: "
            f"DELETE /v1/admin/workspaces/{ws_name}/members/{name}?hard=true "
            f"(agentpost admin member remove {ws_name} {name} --hard)",
        )
    return RequestError(Code.MEMBER_EXISTS, f"member {name!r} exists in {ws_name!r}")


def _workspace(tx: Db, ws_name: str) -> Workspace:
    ws = members.workspace_by_name(tx, ws_name)
    if ws is None:
        raise RequestError(Code.NO_WORKSPACE, f"no workspace {ws_name!r}")
    return ws


async def list_members(request: Request) -> Response:
    """`GET /v1/admin/workspaces/{ws}/members`: every member, removed ones with their status."""
    hub = hub_of(request)
    auth.require_admin(request, hub.admin_hash)
    ws_name = request.path_params["ws"]

    def read(db: Db) -> list[Member]:
        return members.list_members(db, _workspace(db, ws_name).id)

    found = await hub.engine.read(read)
    out = {"workspace": ws_name, "members": [member_out(m) for m in found]}
    return json_response(200, msgspec.json.encode(out))


async def reissue_token(request: Request) -> Response:
    """`POST /v1/admin/workspaces/{ws}/members/{name}/token`: a new token for an active
    member; its older tokens stop working at once (a lost or leaked token)."""
    hub = hub_of(request)
    auth.require_admin(request, hub.admin_hash)
    ws_name = request.path_params["ws"]
    name = request.path_params["name"]
    token = new_token()

    def reissue(tx: Tx) -> Member:
        m = members.member_by_name(tx, _workspace(tx, ws_name).id, name)
        if m is None:
            raise RequestError(Code.MEMBER_NOT_FOUND, f"no member {name!r} in {ws_name!r}")
        if m.status != "active":
            raise auth.removed(m.name, m.kind)
        members.replace_tokens(tx, m.id, token_hash(token))
        tx.notify(auth.FORGET + m.id)  # every process's cache drops the old token
        return m

    m = await hub.engine.write(reissue)
    hub.tokens.forget(m.id)  # right after the commit: the old token is refused from now on
    return json_response(
        200, msgspec.json.encode({"member": member_out(m), "token": token, "workspace": ws_name})
    )


async def remove_member(request: Request) -> Response:
    hub = hub_of(request)
    auth.require_admin(request, hub.admin_hash)
    ws_name = request.path_params["ws"]
    name = request.path_params["name"]
    hard_raw = request.query_params.get("hard", "false").lower()
    if hard_raw not in ("true", "false", "1", "0"):
        raise RequestError(Code.INVALID_REQUEST, "hard must be true or false", field="hard")
    hard = hard_raw in ("true", "1")
    changed: list[str] = []

    def remove(tx: Tx) -> Member:
        ws = members.workspace_by_name(tx, ws_name)
        if ws is None:
            raise RequestError(Code.NO_WORKSPACE, f"no workspace {ws_name!r}")
        m = members.member_by_name(tx, ws.id, name)
        if m is None:
            raise RequestError(Code.MEMBER_NOT_FOUND, f"no member {name!r} in {ws_name!r}")
        its_rooms = rooms.rooms_of_member(tx, m.id)  # before a hard removal drops them
        # A hard removal leaves its agents with no owner: their cached rows must not say
        # otherwise (docs/architecture.md#identity).
        changed[:] = members.owned_agents(tx, m.id) if hard else []
        # Its files are free again, said while its name is still known (docs/reservations.md).
        reservations.end_of_holder(tx, m.id)
        members.remove_member(tx, m.id, hard)
        # Its streams and long polls wake, see the removal and end now, not at the next event.
        for key in [inbox_key(m.id), *(room_key(r.id) for r in its_rooms)]:
            tx.notify(key)
        for member_id in [m.id, *changed]:
            tx.notify(auth.FORGET + member_id)  # every process's token cache drops it
        return m

    m = await hub.engine.write(remove)
    for member_id in [m.id, *changed]:
        hub.tokens.forget(member_id)  # right after the commit: refused from the next request on
    out = {
        "member": {
            "id": m.id,
            "name": m.name,
            "kind": m.kind,
            "status": "removed",
            "owner": m.owner,
            "owner_id": m.owner_id,
        },
        "hard": hard,
    }
    return json_response(200, msgspec.json.encode(out))


async def set_owner(request: Request) -> Response:
    """`PUT /v1/admin/workspaces/{ws}/members/{name}/owner {"owner": NAME | null}`: the
    agent's owner from now on (null: no one), by member id; the one way an agent whose owner
    was removed hard gets one again (docs/architecture.md#identity)."""
    hub = hub_of(request)
    auth.require_admin(request, hub.admin_hash)
    ws_name = request.path_params["ws"]
    name = request.path_params["name"]
    body = await read_json(request, OwnerIn, hub.config.max_json_bytes)

    def change(tx: Tx) -> Member:
        ws = _workspace(tx, ws_name)
        m = members.member_by_name(tx, ws.id, name)
        if m is None:
            raise RequestError(Code.MEMBER_NOT_FOUND, f"no member {name!r} in {ws_name!r}")
        if m.status != "active":
            raise auth.removed(m.name, m.kind)
        if m.kind != "agent":
            raise RequestError(Code.INVALID_REQUEST, "only agents have an owner", field="$.owner")
        owner = None if body.owner is None else _owner(tx, ws, body.owner)
        members.set_owner(tx, m.id, owner)
        tx.notify(auth.FORGET + m.id)  # cached rows of the agent name the old owner
        found = members.member_by_id(tx, m.id)
        assert found is not None
        return found

    m = await hub.engine.write(change)
    hub.tokens.forget(m.id)
    return json_response(200, msgspec.json.encode({"member": member_out(m), "workspace": ws_name}))


def _owner(tx: Db, ws: Workspace, name: str) -> Member:
    owner = members.member_by_name(tx, ws.id, name)
    if owner is None or owner.kind != "human" or owner.status != "active":
        raise RequestError(
            Code.INVALID_REQUEST,
            f"owner {name!r} is not an active human member",
            field="$.owner",
        )
    return owner


def _workspace_retention(db: Db, workspace_id: str) -> RetentionReply:
    events_, media_ = retention.of_workspace(db, workspace_id)
    effective = RetentionEffective(events_ or None, media_ or None)
    return RetentionReply(RetentionOut(events_, media_, effective))


async def get_workspace_retention(request: Request) -> Response:
    """`GET /v1/admin/workspaces/{ws}/retention`: how long the workspace's rooms keep their
    events and files unless a room says otherwise (docs/operations.md "Retention")."""
    hub = hub_of(request)
    auth.require_admin(request, hub.admin_hash)
    ws_name = request.path_params["ws"]
    out = await hub.engine.read(lambda db: _workspace_retention(db, _workspace(db, ws_name).id))
    return json_response(200, msgspec.json.encode(out))


async def set_workspace_retention(request: Request) -> Response:
    """`PUT /v1/admin/workspaces/{ws}/retention`: the admin sets it; null or 0: for ever."""
    hub = hub_of(request)
    auth.require_admin(request, hub.admin_hash)
    ws_name = request.path_params["ws"]
    body = await read_json(request, RetentionIn, hub.config.max_json_bytes)

    def change(tx: Tx) -> RetentionReply:
        ws = _workspace(tx, ws_name)
        events_, media_ = retention.of_workspace(tx, ws.id)
        retention.set_workspace(
            tx,
            ws.id,
            events_ if body.events_seconds is msgspec.UNSET else body.events_seconds,
            media_ if body.media_seconds is msgspec.UNSET else body.media_seconds,
        )
        return _workspace_retention(tx, ws.id)

    return json_response(200, msgspec.json.encode(await hub.engine.write(change)))
