"""One Worker per agent member (docs/architecture.md#one-worker-per-agent, docs/connect.md): every
rule of the Worker lease in one place.

- `take`: a Worker takes the lease at start. It gets it when nobody holds it, when the last
  holder released it or let it lapse (no renewal for the lease's seconds), when it asks to
  take over (`--takeover`), or when the last holder is an earlier run of the same Worker
  (same worker id and host, and the fence it last held: a Worker restarted after a crash
  does not wait for its own lease). The hub cannot see a Worker's processes: the Worker
  names its last fence only once it has seen, on its own host, that the process which
  held it (pid and start time, kept in its folder) is gone, so a copy of a live Worker's
  folder waits like any other (connect/lease.py). Every new holder gets the next fencing
  number. Otherwise: 409 `lease_held`, naming the holder's host, pid and since when.
- `renew`: the holder with the current fence pushes the lapse time out; an older fence is
  409 `lease_lost` (another Worker took over). A lapsed lease nobody took is renewed: no
  other Worker acted under a newer fence meanwhile.
- `release`: the holder lets it go at stop, so a standby takes over at once.
- `check_fence`: inbox acks and posts that carry a fence (the Worker's do) are refused with
  409 `lease_lost` unless it is the member's current one.
- `hold_for_queue`: one lease per agent member across profiles
  (docs/architecture.md#one-worker-per-agent): the AG2 task queue (`/ag2`) holds the same lease for
  its poller, taken or renewed at every poll, so while a `connect` Worker (or `connect --a2a`)
  holds it the queue serves nothing, and while a poller polls a Worker waits as a standby naming
  the queue as the holder.
"""

from __future__ import annotations

import re

import msgspec

from agentpost.core import lease as rules
from agentpost.core.clock import now_ms, rfc3339
from agentpost.core.errors import Code, RequestError
from agentpost.hub.schemas import LeaseHolder
from agentpost.store import leases
from agentpost.store.engine import Db, Tx
from agentpost.store.models import Lease, Member

FENCE_HEADER = "Agentpost-Worker-Fence"
_FENCE = re.compile(r"[1-9][0-9]{0,17}")  # ASCII digits only (str.isdigit takes "²")


class LeaseHeld(RequestError):
    def __init__(self, holder: Lease) -> None:
        who = (
            f"the AG2 relay profile serves this agent (an /ag2 task poller polls with its "
            f"token), since {rfc3339(holder.since)}"
            if holder.worker_id == QUEUE_WORKER_ID
            else f"another Worker serves this agent: host {holder.host!r}, pid {holder.pid}, "
            f"since {rfc3339(holder.since)}"
        )
        super().__init__(
            Code.LEASE_HELD,
            who,
            holder=msgspec.to_builtins(holder_out(holder)),
        )


class LeaseLost(RequestError):
    def __init__(self, fence: int, holder: Lease | None) -> None:
        who = (
            f"; held now by host {holder.host!r}, pid {holder.pid}, since {rfc3339(holder.since)}"
            if holder is not None and not holder.released and holder.fence > 0
            else ""
        )
        super().__init__(
            Code.LEASE_LOST,
            f"Worker fence {fence} is no longer this agent's lease{who}",
            holder=msgspec.to_builtins(holder_out(holder))
            if holder is not None and holder.fence > 0
            else None,
        )


def holder_out(lease: Lease, now: int | None = None) -> LeaseHolder:
    """The lease as the API shows it (no worker id: it names a workspace on some machine)."""
    at = now_ms() if now is None else now
    return LeaseHolder(
        host=lease.host,
        pid=lease.pid,
        fence=lease.fence,
        since=rfc3339(lease.since),
        renewed_at=rfc3339(lease.renewed_at),
        expires_at=rfc3339(lease.expires_at),
        live=live(lease, at),
    )


def live(lease: Lease, now: int) -> bool:
    return rules.live(lease.fence, lease.released, lease.expires_at, now)


def _agent(member: Member) -> None:
    if member.kind != "agent":
        raise RequestError(Code.FORBIDDEN, "only an agent member's Worker takes a lease")


def take(
    tx: Tx,
    member: Member,
    worker_id: str,
    host: str,
    pid: int,
    takeover: bool,
    lease_ms: int,
    last_fence: int | None = None,
) -> tuple[Lease, Lease | None]:
    """(the new lease, the live one it replaced when taken over) or `LeaseHeld`."""
    _agent(member)
    now = now_ms()
    leases.ensure_row(tx, member.id, now)
    old = leases.lock(tx, member.id)
    assert old is not None
    same_worker = old.worker_id == worker_id and old.host == host and old.fence == last_fence
    replaced = old if live(old, now) else None
    if replaced is not None and not takeover and not same_worker:
        raise LeaseHeld(old)
    new = Lease(
        member_id=member.id,
        fence=rules.next_fence(old.fence),
        worker_id=worker_id,
        host=host,
        pid=pid,
        since=now,
        renewed_at=now,
        expires_at=rules.until(now, lease_ms),
        released=False,
    )
    leases.put(tx, new)
    return new, replaced


# The lease the AG2 task queue holds for its poller: no Worker's id (32 hex digits), so a
# Worker never mistakes it for its own earlier run.
QUEUE_WORKER_ID = "ag2-queue"
QUEUE_HOST = "the AG2 relay profile (/ag2 task polls)"


def hold_for_queue(tx: Tx, member: Member, lease_ms: int) -> Lease | None:
    """The member's lease for a poll of its AG2 task queue: renewed when the queue holds
    it, taken when nobody holds it live; None while another holder (a `connect` Worker)
    holds it, and the poll then serves nothing (agent-connect reads an empty poll as
    "not now" and polls again)."""
    now = now_ms()
    leases.ensure_row(tx, member.id, now)
    old = leases.lock(tx, member.id)
    assert old is not None
    if old.worker_id == QUEUE_WORKER_ID and live(old, now):
        leases.renew(tx, member.id, now, now + lease_ms)
        return msgspec.structs.replace(old, renewed_at=now, expires_at=now + lease_ms)
    if live(old, now):
        return None
    new = Lease(
        member_id=member.id,
        fence=rules.next_fence(old.fence),
        worker_id=QUEUE_WORKER_ID,
        host=QUEUE_HOST,
        pid=0,
        since=now,
        renewed_at=now,
        expires_at=rules.until(now, lease_ms),
        released=False,
    )
    leases.put(tx, new)
    return new


def renew(tx: Tx, member: Member, fence: int, lease_ms: int) -> Lease:
    _agent(member)
    now = now_ms()
    found = leases.lock(tx, member.id)
    if found is None or found.fence != fence or found.released:
        raise LeaseLost(fence, found)
    leases.renew(tx, member.id, now, now + lease_ms)
    return msgspec.structs.replace(found, renewed_at=now, expires_at=now + lease_ms)


def release(tx: Tx, member: Member, fence: int) -> None:
    found = leases.lock(tx, member.id)
    if found is None or found.fence != fence:
        raise LeaseLost(fence, found)
    if not found.released:
        leases.release(tx, member.id, now_ms())


def check_fence(db: Db, member: Member, fence: int | None) -> None:
    """Refuse an ack or post of a Worker whose lease another Worker took over. The row is
    read under a shared lock (PostgreSQL): a `take` waits for this write to commit, so no
    stale ack or post commits after a new holder got its fence."""
    if fence is None:
        return
    found = leases.share(db, member.id)
    if found is None or found.fence != fence or found.released:
        raise LeaseLost(fence, found)


def fence_header(raw: str | None) -> int | None:
    """The `Agentpost-Worker-Fence` header: absent, or a positive integer."""
    if raw is None:
        return None
    text = raw.strip()
    if _FENCE.fullmatch(text) is None:
        raise RequestError(
            Code.INVALID_REQUEST,
            f"{FENCE_HEADER} must be a positive integer",
            field=FENCE_HEADER,
        )
    return int(text)
