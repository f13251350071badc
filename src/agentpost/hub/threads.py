"""The one thread (docs/threads.md): `ensure` makes or returns the thread `name` of `owner`.

Runs inside the store's write transaction, so every check here is authoritative. The rules:
- made at most once, also when two hub processes ask at once (`store/threads.py`);
- an archived thread of that owner is unarchived, never replaced (a new room would start a
  new conversation and split the owner's history);
- a room of that name that is not this owner's thread is refused `thread_conflict` and left
  exactly as it is (archived or not), so a send never lands in someone else's room; the
  owner is compared by member id, so a member under a name freed by a hard removal does not
  get the old member's thread back (docs/architecture.md#identity);
- the owner and the caller are participants afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentpost.core.errors import Code, RequestError
from agentpost.store import members, rooms, threads
from agentpost.store.engine import Tx
from agentpost.store.models import Member, Room


@dataclass(frozen=True)
class Ensured:
    room: Room
    workspace: str
    created: bool


def ensure(tx: Tx, ws_name: str, caller: Member, name: str, owner_name: str) -> Ensured:
    ws = members.workspace_by_name(tx, ws_name)
    if ws is None or ws.id != caller.workspace_id:
        raise RequestError(Code.NO_WORKSPACE, f"no workspace {ws_name!r}")
    owner = members.member_by_name(tx, ws.id, owner_name)
    if owner is None or owner.status != "active":
        raise RequestError(
            Code.INVALID_REQUEST, f"no active member {owner_name!r} in {ws_name!r}", field="$.owner"
        )
    created = threads.insert_if_absent(tx, ws.id, name, owner)
    room = rooms.room_by_name(tx, ws.id, name)
    assert room is not None, "inserted or already there"
    if room.kind != threads.KIND or room.owner_id != owner.id:
        if room.kind != threads.KIND:
            what = f"a {room.kind}"
        elif room.owner_id is None:
            what = "a thread whose owner was removed"
        else:
            what = f"{room.owner!r}'s thread"
        raise RequestError(
            Code.THREAD_CONFLICT,
            f"{name!r} in {ws_name!r} is {what}, not a thread of {owner.name!r}; left as it is",
        )
    if room.archived:
        rooms.set_archived(tx, room.id, False)
    rooms.add_participant(tx, room.id, owner.id)
    rooms.add_participant(tx, room.id, caller.id)
    fresh = rooms.room_by_id(tx, room.id)
    assert fresh is not None
    return Ensured(room=fresh, workspace=ws.name, created=created)
