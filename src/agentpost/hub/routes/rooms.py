"""Rooms: create, read, list, participants, archive, and the caller's read marker
(docs/api.md)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from agentpost.core.durations import in_words
from agentpost.core.errors import AuthError, Code, RequestError
from agentpost.hub import auth
from agentpost.hub.decode import read_json
from agentpost.hub.errors import json_response
from agentpost.hub.schemas import (
    ReadIn,
    ReadMarkerOut,
    RetentionEffective,
    RetentionIn,
    RetentionOut,
    RetentionReply,
    RoomIn,
    RoomOut,
    RoomSettingsIn,
)
from agentpost.hub.state import Hub, hub_of
from agentpost.store import members, read_markers, retention, rooms
from agentpost.store.engine import Db, Tx
from agentpost.store.models import Member, Room


def room_out(
    db: Db, room: Room, workspace: str, who: Member | None, read: tuple[int, int] | None = None
) -> RoomOut:
    """The room as `who` sees it: with `who`'s read marker and unread count (`read`, when
    the caller read them already; none for the admin)."""
    if read is None:
        read = read_markers.of_room(db, who.id, room.id) if who is not None else (0, 0)
    return RoomOut(
        id=room.id,
        workspace=workspace,
        name=room.name,
        kind=room.kind,
        mode=room.mode,
        master=room.master,
        archived=room.archived,
        owner=room.owner,
        owner_id=room.owner_id,
        sensitive_filter=room.sensitive_filter,
        last_seq=room.last_seq,
        participants=rooms.participant_names(db, room.id),
        router=room.router,
        max_delegation_depth=room.max_delegation_depth,
        agent_wakeups_per_minute=room.agent_wakeups_per_minute,
        read_seq=read[0],
        unread=read[1],
    )


async def caller(request: Request, hub: Hub) -> Member | None:
    """The member behind the token, or None for the admin token."""
    if auth.is_admin(request, hub.admin_hash):
        return None
    return await auth.member(request, hub)


def visible_room(db: Db, room_id: str, who: Member | None) -> Room:
    """The room if it exists and the caller takes part in it (the admin sees all)."""
    room = rooms.room_by_id(db, room_id)
    if room is None or (who is not None and room.workspace_id != who.workspace_id):
        raise RequestError(Code.ROOM_NOT_FOUND, f"no room {room_id!r}")
    if who is not None and not rooms.is_participant(db, room.id, who.id):
        raise AuthError(
            Code.CHANNEL_MEMBERSHIP_REQUIRED, f"{who.name!r} is not a participant of this room"
        )
    return room


def _router_available(hub: Hub, router: str | None) -> None:
    """`llm` needs a model endpoint: on a hub without one it would wake no one (docs/delegation.md
    "The rules")."""
    if router == "llm" and hub.router_settings is None:
        raise RequestError(
            Code.INVALID_REQUEST,
            "this hub has no model endpoint for the llm router (AGENTPOST_ROUTER_URL is not "
            "set), so it would wake no one: choose sole-agent or none, or start the hub "
            "with AGENTPOST_ROUTER_URL",
            field="$.router",
        )


async def create_room(request: Request) -> Response:
    hub = hub_of(request)
    who = await caller(request, hub)
    ws_name = request.path_params["ws"]
    body = await read_json(request, RoomIn, hub.config.max_json_bytes)
    _router_available(hub, body.router)
    if body.mode == "master" and body.master is None:
        raise RequestError(
            Code.INVALID_REQUEST, "a master-mode room needs `master`", field="$.master"
        )

    def create(tx: Tx) -> RoomOut:
        ws = members.workspace_by_name(tx, ws_name)
        if ws is None or (who is not None and who.workspace_id != ws.id):
            raise RequestError(Code.NO_WORKSPACE, f"no workspace {ws_name!r}")
        wanted = list(dict.fromkeys(body.participants + ([body.master] if body.master else [])))
        found = {m.name: m for m in members.live_members_named(tx, ws.id, wanted)}
        unknown = [n for n in wanted if n not in found]
        if unknown:
            raise RequestError(
                Code.INVALID_REQUEST,
                f"not active members of {ws_name!r}: {', '.join(unknown)}",
                field="$.participants",
            )
        if body.master is not None and found[body.master].kind != "agent":
            raise RequestError(
                Code.INVALID_REQUEST, "the master must be an agent", field="$.master"
            )
        room = rooms.create_room(
            tx,
            ws.id,
            body.name,
            body.kind,
            body.mode,
            body.master,
            None,
            body.sensitive_filter,
            body.router,
            body.max_delegation_depth,
            body.agent_wakeups_per_minute,
        )
        if room is None:
            raise RequestError(Code.ROOM_EXISTS, f"room {body.name!r} exists in {ws_name!r}")
        if who is not None:
            rooms.add_participant(tx, room.id, who.id)
        for m in found.values():
            rooms.add_participant(tx, room.id, m.id)
        return room_out(tx, room, ws.name, who)

    out = await hub.engine.write(create)
    return json_response(201, msgspec.json.encode({"room": out}))


async def list_rooms(request: Request) -> Response:
    hub = hub_of(request)
    who = await auth.member(request, hub)
    if request.path_params["ws"] != who.workspace_name:
        raise RequestError(Code.NO_WORKSPACE, f"no workspace {request.path_params['ws']!r}")

    def read(db: Db) -> list[RoomOut]:
        marks = read_markers.of_member(db, who.id)  # one query for every room's numbers
        return [
            room_out(db, r, who.workspace_name, who, marks.get(r.id, (0, 0)))
            for r in rooms.rooms_of_member(db, who.id)
        ]

    return json_response(200, msgspec.json.encode({"rooms": await hub.engine.read(read)}))


async def get_room(request: Request) -> Response:
    hub = hub_of(request)
    who = await caller(request, hub)
    room_id = request.path_params["room"]

    def read(db: Db) -> RoomOut:
        room = visible_room(db, room_id, who)
        return room_out(db, room, members.workspace_name(db, room.workspace_id), who)

    return json_response(200, msgspec.json.encode({"room": await hub.engine.read(read)}))


async def set_participant(request: Request) -> Response:
    hub = hub_of(request)
    who = await caller(request, hub)
    room_id = request.path_params["room"]
    name = request.path_params["name"]
    adding = request.method == "PUT"

    def change(tx: Tx) -> RoomOut:
        # A post that comes next sees who takes part (docs/architecture.md#write-path).
        rooms.lock(tx, room_id)
        room = visible_room(tx, room_id, who)
        target = members.member_by_name(tx, room.workspace_id, name)
        if target is None or (adding and target.status != "active"):
            raise RequestError(Code.MEMBER_NOT_FOUND, f"no active member {name!r}")
        if adding:
            rooms.add_participant(tx, room.id, target.id)
        else:
            rooms.remove_participant(tx, room.id, target.id)
        return room_out(tx, room, members.workspace_name(tx, room.workspace_id), who)

    out = await hub.engine.write(change, room_id)
    return json_response(200, msgspec.json.encode({"room": out}))


async def set_archived(request: Request) -> Response:
    hub = hub_of(request)
    who = await caller(request, hub)
    room_id = request.path_params["room"]
    archived = request.url.path.endswith("/archive")

    def change(tx: Tx) -> RoomOut:
        room = visible_room(tx, room_id, who)
        rooms.set_archived(tx, room.id, archived)
        fresh = rooms.room_by_id(tx, room.id)
        assert fresh is not None
        return room_out(tx, fresh, members.workspace_name(tx, room.workspace_id), who)

    out = await hub.engine.write(change, room_id)
    return json_response(200, msgspec.json.encode({"room": out}))


def _given(value: int | None, current: int) -> int:
    return current if value is None else value


async def update_settings(request: Request) -> Response:
    """`PATCH /v1/rooms/{room}`: a human participant (or the admin) changes how the room
    routes: mode, master, router policy, sensitive-data filter, delegation depth limit and
    wake budget (docs/delegation.md)."""
    hub = hub_of(request)
    who = await caller(request, hub)
    room_id = request.path_params["room"]
    body = await read_json(request, RoomSettingsIn, hub.config.max_json_bytes)
    _router_available(hub, body.router)
    if who is not None and who.kind != "human":
        raise AuthError(Code.FORBIDDEN, "only a human participant changes how a room routes")

    def change(tx: Tx) -> RoomOut:
        room = visible_room(tx, room_id, who)
        mode = body.mode or room.mode
        master = body.master if body.master is not None else room.master
        if mode == "dynamic":
            # A master belongs to master mode; dynamic mode has none (docs/delegation.md
            # "The rules").
            master = None
        if mode == "master":
            m = members.member_by_name(tx, room.workspace_id, master) if master else None
            if m is None or m.kind != "agent" or m.status != "active":
                raise RequestError(
                    Code.INVALID_REQUEST,
                    "master mode needs `master`: an active agent",
                    field="$.master",
                )
            rooms.add_participant(tx, room.id, m.id)
        rooms.update_settings(
            tx,
            room.id,
            mode,
            master,
            body.router or room.router,
            room.sensitive_filter if body.sensitive_filter is None else body.sensitive_filter,
            _given(body.max_delegation_depth, room.max_delegation_depth),
            _given(body.agent_wakeups_per_minute, room.agent_wakeups_per_minute),
        )
        fresh = rooms.room_by_id(tx, room.id)
        assert fresh is not None
        return room_out(tx, fresh, members.workspace_name(tx, room.workspace_id), who)

    out = await hub.engine.write(change, room_id)
    return json_response(200, msgspec.json.encode({"room": out}))


async def mark_read(request: Request) -> Response:
    """`POST /v1/rooms/{room}/read {"seq"}`: the caller has read the room up to `seq`. The
    marker never moves back, nor past the room's last event (a seq from the future would
    hide events not posted yet); answered with where it stands and what is unread past it.
    Members only: the admin reads no rooms, so it has no marker (401 as for the inbox)."""
    hub = hub_of(request)
    who = await auth.member(request, hub)
    room_id = request.path_params["room"]
    body = await read_json(request, ReadIn, hub.config.max_json_bytes)

    def advance(tx: Tx) -> ReadMarkerOut:
        room = visible_room(tx, room_id, who)
        read_markers.advance(tx, who.id, room.id, min(body.seq, room.last_seq))
        read_seq, unread = read_markers.of_room(tx, who.id, room.id)
        return ReadMarkerOut(room=room.id, read_seq=read_seq, unread=unread)

    out = await hub.engine.write(advance)
    return json_response(200, msgspec.json.encode(out))


MIN_MEMBER_KEEP = 86400  # a member may not make a room forget in less than a day


def _member_may_keep(db: Db, workspace_id: str, events: int | None, media: int | None) -> None:
    """What a participant may set (the admin may set anything): a day or more, and never
    longer than the workspace keeps (for ever included), so no one member erases the room's
    history at once, nor takes it out of the operator's policy."""
    policies = retention.of_workspace(db, workspace_id)
    for what, mine, policy in zip(("events", "media"), (events, media), policies, strict=True):
        field = f"$.{what}_seconds"
        if mine is not None and 0 < mine < MIN_MEMBER_KEEP:
            raise AuthError(
                Code.FORBIDDEN,
                f"a participant keeps a room's {what} for a day or more (not "
                f"{in_words(mine)}); shorter is the admin's",
                field=field,
            )
        if policy and mine is not None and (mine == 0 or mine > policy):
            asked = "for ever" if mine == 0 else f"for {in_words(mine)}"
            raise AuthError(
                Code.FORBIDDEN,
                f"the workspace keeps {what} for {in_words(policy)}: a participant may keep "
                f"them for less (not {asked}), only the admin for longer",
                field=field,
            )


def _room_retention(db: Db, room_id: str) -> RetentionReply:
    own_events, own_media, events_, media_ = retention.of_room(db, room_id)
    return RetentionReply(RetentionOut(own_events, own_media, RetentionEffective(events_, media_)))


async def get_retention(request: Request) -> Response:
    """`GET /v1/rooms/{room}/retention`: how long the room keeps its events and files
    (docs/operations.md "Retention"), as set and in effect."""
    hub = hub_of(request)
    who = await caller(request, hub)
    room_id = request.path_params["room"]

    def read(db: Db) -> RetentionReply:
        room = visible_room(db, room_id, who)
        return _room_retention(db, room.id)

    return json_response(200, msgspec.json.encode(await hub.engine.read(read)))


async def set_retention(request: Request) -> Response:
    """`PUT /v1/rooms/{room}/retention`: a human participant (the room's owner, when it has
    one) or the admin sets how long the room keeps its events and files; null: as its
    workspace. A participant: a day or more, and no longer than the workspace keeps them."""
    hub = hub_of(request)
    who = await caller(request, hub)
    room_id = request.path_params["room"]
    body = await read_json(request, RetentionIn, hub.config.max_json_bytes)

    def change(tx: Tx) -> RetentionReply:
        room = visible_room(tx, room_id, who)
        if who is not None and (
            who.kind != "human" or (room.owner is not None and room.owner_id != who.id)
        ):
            raise AuthError(
                Code.FORBIDDEN,
                "only a human participant (the room's owner, when it has one) or the admin "
                "sets a room's retention",
            )
        own_events, own_media, _, _ = retention.of_room(tx, room.id)
        events_ = own_events if body.events_seconds is msgspec.UNSET else body.events_seconds
        media_ = own_media if body.media_seconds is msgspec.UNSET else body.media_seconds
        if who is not None:
            _member_may_keep(tx, room.workspace_id, events_, media_)
        retention.set_room(tx, room.id, events_, media_)
        return _room_retention(tx, room.id)

    out = await hub.engine.write(change, room_id)
    return json_response(200, msgspec.json.encode(out))
