"""The two fences against runaway agent traffic (docs/delegation.md "Depth and budget"):
the room's wake budget per window and the one depth-limit notice per chain.

Both are written in the post's transaction under the room's row lock (the post took it
with the room's next seq), so hub processes sharing a PostgreSQL database spend one budget
and post one notice; SQLite's one write transaction excludes every other writer.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentpost.store.engine import Db


@dataclass(frozen=True, slots=True)
class Spent:
    """What `spend_wakeups` decided: whether the wake-ups fit the window's budget, and
    whether this post is the first refused one of the window (it then posts the notice)."""

    admitted: bool
    notice_due: bool


def spend_wakeups(
    db: Db, room_id: str, window: int, wanted: int, fenced: int, budget: int
) -> Spent:
    """Spend `wanted` wake-ups of window `window` (its start, ms) if they fit `budget`; else
    spend only the `wanted - fenced` that are never withheld and mark the window spent, so
    nothing fenced passes until the next window. Call with the room's row lock held."""
    row = db.one(
        "SELECT wake_window, wake_count, wake_notice_window FROM rooms WHERE id = ?", (room_id,)
    )
    if row is None:
        return Spent(True, False)
    count = int(row[1]) if int(row[0]) == window else 0
    if fenced == 0 or count + wanted <= budget:
        db.run(
            "UPDATE rooms SET wake_window = ?, wake_count = ? WHERE id = ?",
            (window, count + wanted, room_id),
        )
        return Spent(True, False)
    notice_due = int(row[2]) != window
    db.run(
        "UPDATE rooms SET wake_window = ?, wake_count = ?, wake_notice_window = ? WHERE id = ?",
        (window, max(count + wanted - fenced, budget), window, room_id),
    )
    return Spent(False, notice_due)


def claim_depth_notice(db: Db, room_id: str, chain_event: str, notice_event: str) -> bool:
    """True when no depth-limit notice was posted for the chain that `chain_event` began;
    the caller then posts `notice_event` in the same transaction."""
    return (
        db.run(
            "INSERT INTO depth_notices (chain_event, room_id, notice_event) VALUES (?, ?, ?)"
            " ON CONFLICT (chain_event) DO NOTHING",
            (chain_event, room_id, notice_event),
        )
        == 1
    )


def spend_origin(db: Db, origin: str, wanted: int, total: int, at: int) -> bool:
    """Spend `wanted` agent wake-ups of `origin` if they fit its `total`; False when they do
    not (nothing spent). The origin's row is locked by the update (PostgreSQL's row lock, or
    SQLite's one write transaction), the last lock a post takes, so posts in two rooms of
    one chain cannot deadlock and every hub process spends one total."""
    db.run(
        "INSERT INTO origin_wakeups (origin, spent, created_at) VALUES (?, 0, ?)"
        " ON CONFLICT (origin) DO NOTHING",
        (origin, at),
    )
    return (
        db.run(
            "UPDATE origin_wakeups SET spent = spent + ? WHERE origin = ? AND spent + ? <= ?",
            (wanted, origin, wanted, total),
        )
        == 1
    )


def claim_origin_notice(db: Db, origin: str, notice_event: str) -> bool:
    """True for the first post of `origin` refused once its total was spent; the caller
    posts `notice_event` in the same transaction (one notice per stopped chain)."""
    return (
        db.run(
            "UPDATE origin_wakeups SET notice_event = ? WHERE origin = ? AND notice_event IS NULL",
            (notice_event, origin),
        )
        == 1
    )


def origin_spent(db: Db, origin: str) -> int:
    row = db.one("SELECT spent FROM origin_wakeups WHERE origin = ?", (origin,))
    return int(row[0]) if row else 0


def forget_origins(db: Db, not_before: int, limit: int) -> int:
    """Delete up to `limit` origin totals begun before `not_before` (ms); the number."""
    return db.run(
        "DELETE FROM origin_wakeups WHERE origin IN (SELECT origin FROM origin_wakeups"
        " WHERE created_at < ? LIMIT ?)",
        (not_before, limit),
    )
