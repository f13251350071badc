"""Receipt state per (delegation event E1, replier): the terminal slot, the needs_input
count (docs/delegation.md). Callers hold E1's lock (`events.lock`) while they read and write."""

from __future__ import annotations

from agentpost.store.engine import Db


def state(db: Db, event_id: str, replier: str) -> tuple[str | None, int]:
    """(event id that took the terminal slot or None, needs_input wake-ups so far)."""
    row = db.one(
        "SELECT terminal_event, needs_input FROM receipts WHERE event_id = ? AND replier = ?",
        (event_id, replier),
    )
    return (row[0], int(row[1])) if row else (None, 0)


def _ensure(db: Db, event_id: str, replier: str) -> None:
    db.run(
        "INSERT INTO receipts (event_id, replier, needs_input) VALUES (?, ?, 0)"
        " ON CONFLICT (event_id, replier) DO NOTHING",
        (event_id, replier),
    )


def claim_terminal(db: Db, event_id: str, replier: str, receipt_event: str) -> bool:
    """Take the terminal slot; False when it was already taken."""
    _ensure(db, event_id, replier)
    return (
        db.run(
            "UPDATE receipts SET terminal_event = ? WHERE event_id = ? AND replier = ?"
            " AND terminal_event IS NULL",
            (receipt_event, event_id, replier),
        )
        == 1
    )


def count_needs_input(db: Db, event_id: str, replier: str, limit: int) -> int | None:
    """Count one more needs_input wake-up; None when `limit` were already counted."""
    _ensure(db, event_id, replier)
    row = db.one(
        "UPDATE receipts SET needs_input = needs_input + 1 WHERE event_id = ? AND replier = ?"
        " AND needs_input < ? RETURNING needs_input",
        (event_id, replier, limit),
    )
    return int(row[0]) if row else None


def claim_answer(db: Db, event_id: str, replier: str, answer_event: str) -> bool:
    """Record that `replier` answered the person's event with `answer_event`; False when it
    did before (docs/architecture.md#receipts)."""
    return (
        db.run(
            "INSERT INTO answers (event_id, replier, answer_event) VALUES (?, ?, ?)"
            " ON CONFLICT (event_id, replier) DO NOTHING",
            (event_id, replier, answer_event),
        )
        == 1
    )
