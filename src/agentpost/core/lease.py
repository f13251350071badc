"""The one shape of a lease (docs/architecture.md#leases): a holder id, a fencing number that
only grows, an expiry, renew and release. Two tables follow these rules: `worker_leases` (one
Worker per agent member, hub/leases.py) and `reservations` (files an agent is about to change,
hub/reservations.py). A rule of either that is about time or fences lives here, once."""

from __future__ import annotations


def live(fence: int, released: bool, expires_at: int, now: int) -> bool:
    """Held now: granted (fence 0 is the placeholder nobody holds), not let go, not lapsed.
    A lease is over at its expiry even before a sweeper marks it, so a grant never waits
    on the sweep."""
    return fence > 0 and not released and expires_at > now


def next_fence(last: int) -> int:
    """Every new grant gets a number greater than any before it in its scope (an agent
    member's lease, a project's reservations): work done under an older one is refused."""
    return last + 1


def until(now: int, term_ms: int) -> int:
    """The expiry of a grant or renewal made at `now` for `term_ms`."""
    return now + term_ms
