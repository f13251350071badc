"""The presence frames of a room stream opened with `?presence=1` (docs/api.md "Streams and
long polls"): the room's active participants, who of them is online, last seen, and an
agent's Worker, as the workspace's member list shows them (docs/presence.md). A frame is
`event: presence` with no `id:`, so a reader's Last-Event-ID never moves for it; it is sent
at open and then only when the snapshot changed (hub/routes/sse.py decides when to look)."""

from __future__ import annotations

import msgspec
from starlette.requests import Request

from agentpost.core.clock import now_ms
from agentpost.core.errors import Code, RequestError
from agentpost.hub.routes.members import member_seen
from agentpost.hub.schemas import PresenceMember, RoomPresence
from agentpost.hub.state import Hub
from agentpost.store import leases as lease_rows
from agentpost.store import presence, rooms
from agentpost.store.engine import Db
from agentpost.store.models import Lease, Member

PARAM = "presence"


def wanted(request: Request) -> bool:
    """The `presence` query parameter: absent or `0` (no frames) or `1`."""
    raw = request.query_params.get(PARAM)
    if raw is None or raw == "0":
        return False
    if raw == "1":
        return True
    raise RequestError(Code.INVALID_REQUEST, f"{PARAM} must be 0 or 1", field=PARAM)


def frame(snapshot: RoomPresence) -> bytes:
    return b"event: presence\ndata: " + msgspec.json.encode(snapshot) + b"\n\n"


class RoomPresenceFrames:
    """One stream's presence frames (an `sse.SideFrames`): each look reads the room's active
    participants, their stored presence and leases in one store read, and answers a frame
    only when it differs from the last one this stream sent."""

    def __init__(self, hub: Hub, room_id: str) -> None:
        self.hub = hub
        self.room_id = room_id
        self.every = hub.config.presence_push_seconds
        self._last: bytes | None = None

    async def changed(self) -> bytes | None:
        def read(db: Db) -> tuple[list[Member], dict[str, int], dict[str, Lease]]:
            return (
                rooms.active_members(db, self.room_id),
                presence.of_room(db, self.room_id),
                lease_rows.of_room(db, self.room_id),
            )

        found, stored, held = await self.hub.engine.read_stream(read)
        now = now_ms()
        seen = [member_seen(self.hub, m, stored.get(m.id), now, held.get(m.id)) for m in found]
        out = frame(
            RoomPresence(
                members=[
                    PresenceMember(
                        name=s.name,
                        kind=s.kind,
                        online=s.online,
                        last_seen=s.last_seen,
                        worker=s.worker,
                    )
                    for s in seen
                ]
            )
        )
        if out == self._last:
            return None
        self._last = out
        return out
