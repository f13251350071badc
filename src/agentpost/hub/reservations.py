"""File reservations (docs/reservations.md, docs/architecture.md#leases): every rule of who
may hold, renew and end a project's path patterns, in one place.

- `reserve`: decided in one write transaction under the (workspace, project) row's lock
  (FOR UPDATE on PostgreSQL, SQLite's single writer), so racing requests on any number of hub
  processes see each other and at most one exclusive grant is made. An exclusive request
  conflicts with any overlapping pattern another member holds; a shared one with overlapping
  exclusive ones (core/globs.py: never "no overlap" when some path matches both). A refusal
  (409 `reservation_conflict`) names each conflict; a grant gets the project's next fence.
- `renew`: the holder pushes the expiry out while the reservation is held.
- `end`: release (the holder), force-release (the admin, or an agent holder's owner: member
  ids compared, never names), expiry (`sweep`), the holder's removal (`end_of_holder`).
- Grants and ends are hub notices in the announcing room, waking no one.
The lease shape (fence, expiry) is the Worker lease's, from core/lease.py.
"""

from __future__ import annotations

import os

import msgspec

from agentpost.core import globs
from agentpost.core import lease as rules
from agentpost.core.clock import now_ms, rfc3339
from agentpost.core.errors import AuthError, Code, RequestError
from agentpost.core.ids import new_id
from agentpost.hub import posting
from agentpost.hub.notify import room_key
from agentpost.hub.routing.decision import Notice
from agentpost.hub.schemas import ReservationConflictOut, ReservationOut
from agentpost.store import members, rooms
from agentpost.store import reservations as rows
from agentpost.store.engine import Db, Tx
from agentpost.store.models import Member, Reservation

HELD = "held"
RELEASED = "released"
FORCED = "forced"
EXPIRED = "expired"
REMOVED = "removed"
WORKER_GONE = "worker_gone"
# A holder's Worker lease that stayed ended this long is lost for good: its agent's
# reservations end (a Worker restarted within it keeps them). Seconds; a test shortens it.
WORKER_GRACE_ENV = "AGENTPOST_RESERVATION_WORKER_GRACE"
WORKER_GRACE_SECONDS = 600.0
NOTICE_KEY = "agentpost/reservation"


class ReservationConflict(RequestError):
    def __init__(self, conflicts: list[ReservationConflictOut]) -> None:
        who = "; ".join(
            f"{c.holder} holds {', '.join(c.paths)}"
            f"{' exclusively' if c.exclusive else ' shared'} until {c.expires_at}"
            + (f" ({c.reason})" if c.reason else "")
            for c in conflicts
        )
        super().__init__(
            Code.RESERVATION_CONFLICT,
            f"not granted: {who}",
            conflicts=[msgspec.to_builtins(c) for c in conflicts],
        )


def project_of(text: str) -> str:
    """The project as named (the body's schema already refused control characters and
    spaces at either end; a query parameter is held to the same)."""
    if not text or text != text.strip(" ") or any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise RequestError(Code.INVALID_REQUEST, "project must be a name", field="project")
    return text


def patterns(paths: list[str]) -> list[str]:
    """The asked patterns, normalized, each once, in order; 400 naming a bad one."""
    out: list[str] = []
    for i, text in enumerate(paths):
        try:
            p = globs.normalize(text)
        except globs.GlobError as exc:
            raise RequestError(Code.INVALID_REQUEST, str(exc), field=f"$.paths[{i}]") from None
        if p not in out:
            out.append(p)
    return out


def held(r: Reservation, now: int) -> bool:
    return r.ended_at is None and rules.live(r.fence, False, r.expires_at, now)


def state_of(r: Reservation, now: int) -> str:
    if r.ended_by is not None:
        return r.ended_by
    return HELD if r.expires_at > now else EXPIRED


def out(r: Reservation, now: int | None = None) -> ReservationOut:
    at = now_ms() if now is None else now
    return ReservationOut(
        id=r.id,
        project=r.project,
        paths=r.paths,
        exclusive=r.exclusive,
        holder=r.holder,
        holder_id=r.holder_id,
        fence=r.fence,
        reason=r.reason,
        room=r.room_id,
        since=rfc3339(r.since),
        renewed_at=rfc3339(r.renewed_at),
        expires_at=rfc3339(r.expires_at),
        state=state_of(r, at),
        ended_at=rfc3339(r.ended_at) if r.ended_at is not None else None,
    )


def _conflict(r: Reservation, pairs: list[tuple[str, str]]) -> ReservationConflictOut:
    return ReservationConflictOut(
        id=r.id,
        holder=r.holder,
        holder_id=r.holder_id,
        paths=list(dict.fromkeys(theirs for _, theirs in pairs)),
        requested=list(dict.fromkeys(mine for mine, _ in pairs)),
        exclusive=r.exclusive,
        reason=r.reason,
        expires_at=rfc3339(r.expires_at),
    )


def conflicts(
    live: list[Reservation], who: Member, paths: list[str], exclusive: bool, now: int
) -> list[ReservationConflictOut]:
    """Others' held reservations in the way of `paths`: any overlapping one for an
    exclusive request, an overlapping exclusive one for a shared request."""
    found = []
    for r in live:
        if r.holder_id == who.id or not held(r, now) or not (exclusive or r.exclusive):
            continue
        pairs = globs.collisions(paths, r.paths)
        if pairs:
            found.append(_conflict(r, pairs))
    return found


def _announcing_room(tx: Tx, room_id: str, who: Member) -> str:
    found = rooms.room_for_member(tx, room_id, who.id)
    if found is None or found[0].workspace_id != who.workspace_id:
        raise RequestError(Code.ROOM_NOT_FOUND, f"no room {room_id!r}", field="$.room")
    room, participant, _status = found
    if not participant:
        raise AuthError(
            Code.CHANNEL_MEMBERSHIP_REQUIRED, f"{who.name!r} is not a participant of this room"
        )
    if room.archived:
        raise RequestError(Code.ROOM_ARCHIVED, "the room is archived; unarchive it to announce")
    return room.id


def _announce(tx: Tx, r: Reservation, what: str, text: str) -> None:
    """A hub notice in the reservation's room, waking no one (an archived or deleted room
    is left silent)."""
    if r.room_id is None:
        return
    room = rooms.room_by_id(tx, r.room_id)
    if room is None or room.archived:
        return
    meta = {NOTICE_KEY: {"id": r.id, "project": r.project, "state": what, "fence": r.fence}}
    posting.append_notice(tx, room, Notice(new_id("ev"), text, meta), about=None)
    tx.notify(room_key(room.id))


def _what(r: Reservation) -> str:
    kind = "exclusively" if r.exclusive else "shared"
    return f"{', '.join(r.paths)} of {r.project} ({kind})"


def reserve(
    tx: Tx,
    who: Member,
    project: str,
    paths: list[str],
    exclusive: bool,
    ttl_ms: int,
    reason: str,
    room_id: str | None,
) -> Reservation:
    """Grant `paths` to `who`, or raise `ReservationConflict` naming what is in the way."""
    fence = rows.lock_project(tx, who.workspace_id, project)
    now = now_ms()
    found = conflicts(rows.unended(tx, who.workspace_id, project), who, paths, exclusive, now)
    if found:
        raise ReservationConflict(found)
    announce = _announcing_room(tx, room_id, who) if room_id is not None else None
    r = Reservation(
        id=new_id("rsv"),
        workspace_id=who.workspace_id,
        project=project,
        holder_id=who.id,
        holder=who.name,
        paths=paths,
        exclusive=exclusive,
        reason=reason,
        room_id=announce,
        fence=rules.next_fence(fence),
        since=now,
        renewed_at=now,
        expires_at=rules.until(now, ttl_ms),
    )
    rows.set_fence(tx, who.workspace_id, project, r.fence)
    rows.insert(tx, r)
    why = f": {reason}" if reason else ""
    text = f"{who.name} reserved {_what(r)} until {rfc3339(r.expires_at)}{why}"
    _announce(tx, r, HELD, text)
    return r


def _mine(db: Db, who: Member, reservation_id: str) -> Reservation:
    r = rows.get(db, reservation_id)
    if r is None or r.workspace_id != who.workspace_id:
        raise RequestError(Code.RESERVATION_NOT_FOUND, f"no reservation {reservation_id!r}")
    return r


def renew(tx: Tx, who: Member, reservation_id: str, ttl_ms: int) -> Reservation:
    """The holder holds it longer. One that ended or lapsed is not renewed: another member
    may have been granted its paths since (reserve again)."""
    r = _mine(tx, who, reservation_id)
    if r.holder_id != who.id:
        raise AuthError(Code.FORBIDDEN, "only the holder renews a reservation")
    rows.lock_project(tx, r.workspace_id, r.project)
    r = _mine(tx, who, reservation_id)  # read again under the project's lock
    now = now_ms()
    if not held(r, now):
        raise RequestError(
            Code.RESERVATION_ENDED,
            f"reservation {r.id} is {state_of(r, now)}; reserve the paths again",
            reservation=msgspec.to_builtins(out(r, now)),
        )
    rows.renew(tx, r.id, now, rules.until(now, ttl_ms))
    return msgspec.structs.replace(r, renewed_at=now, expires_at=rules.until(now, ttl_ms))


def release(tx: Tx, who: Member | None, reservation_id: str) -> Reservation:
    """Release by its holder, or force-release by the admin (`who` None) or by the owner of
    the agent that holds it (compared by member id, docs/architecture.md#identity). An
    ended one answers as it is: releasing twice is harmless."""
    r = rows.get(tx, reservation_id)
    if r is None or (who is not None and r.workspace_id != who.workspace_id):
        raise RequestError(Code.RESERVATION_NOT_FOUND, f"no reservation {reservation_id!r}")
    if who is None:
        why = FORCED
    elif who.id == r.holder_id:
        why = RELEASED
    else:
        holder = members.member_by_id(tx, r.holder_id)
        if holder is None or holder.kind != "agent" or holder.owner_id != who.id:
            raise AuthError(
                Code.FORBIDDEN,
                "only the holder, the admin, or the owner of the agent that holds it releases"
                " a reservation",
            )
        why = FORCED
    rows.lock_project(tx, r.workspace_id, r.project)
    return _end(tx, r.id, why, who.name if who is not None else "the admin") or (
        rows.get(tx, r.id) or r
    )


def _end(tx: Tx, reservation_id: str, why: str, by: str) -> Reservation | None:
    """End it (under its project's lock, taken by the caller) and say so in its room;
    None when it had ended already."""
    now = now_ms()
    r = rows.get(tx, reservation_id)
    if r is None or r.ended_at is not None or not rows.end(tx, r.id, now, why):
        return None
    ended = msgspec.structs.replace(r, ended_at=now, ended_by=why)
    text = {
        RELEASED: f"{r.holder} released {_what(r)}",
        FORCED: f"{by} force-released {r.holder}'s {_what(r)}",
        EXPIRED: f"{r.holder}'s reservation of {_what(r)} expired",
        REMOVED: f"{r.holder} was removed; their reservation of {_what(r)} ended",
        WORKER_GONE: f"{r.holder}'s Worker stopped serving it; its reservation of "
        f"{_what(r)} ended",
    }[why]
    _announce(tx, ended, why, text)
    return ended


def end_of_holder(tx: Tx, holder_id: str) -> int:
    """End every reservation of a member being removed (in the removal's transaction)."""
    n = 0
    for r in rows.of_holder(tx, holder_id):
        rows.lock_project(tx, r.workspace_id, r.project)
        n += _end(tx, r.id, REMOVED, "") is not None
    return n


def sweep(tx: Tx, limit: int = 200) -> int:
    """End reservations whose time ran out, and those of agents whose Worker's lease is
    lost for good (the hub's sweeper); how many."""
    n = 0
    now = now_ms()
    for r in rows.lapsed(tx, now, limit):
        rows.lock_project(tx, r.workspace_id, r.project)
        n += _end(tx, r.id, EXPIRED, "") is not None
    for r in rows.of_lost_workers(tx, now - worker_grace_ms(), limit):
        rows.lock_project(tx, r.workspace_id, r.project)
        n += _end(tx, r.id, WORKER_GONE, "") is not None
    return n


def worker_grace_ms() -> int:
    raw = os.environ.get(WORKER_GRACE_ENV, "")
    try:
        seconds = float(raw) if raw else WORKER_GRACE_SECONDS
    except ValueError:
        seconds = WORKER_GRACE_SECONDS
    return int(max(0.0, seconds) * 1000)


def live(db: Db, workspace_id: str, project: str | None) -> list[Reservation]:
    now = now_ms()
    return [r for r in rows.unended(db, workspace_id, project) if held(r, now)]


def check(db: Db, who: Member, project: str, paths: list[str]) -> list[ReservationConflictOut]:
    """Others' exclusive reservations covering any of the concrete `paths` (the guard's
    and the agents' edit hooks' question: may I write these now?)."""
    now = now_ms()
    found = []
    for r in rows.unended(db, who.workspace_id, project):
        if r.holder_id == who.id or not r.exclusive or not held(r, now):
            continue
        pairs = [(p, pat) for p in paths for pat in r.paths if globs.matches(pat, p)]
        if pairs:
            found.append(_conflict(r, pairs))
    return found


def concrete(paths: list[str]) -> list[str]:
    out_: list[str] = []
    for i, text in enumerate(paths):
        try:
            p = globs.normalize_path(text)
        except globs.GlobError as exc:
            raise RequestError(Code.INVALID_REQUEST, str(exc), field=f"$.paths[{i}]") from None
        if p not in out_:
            out_.append(p)
    return out_
