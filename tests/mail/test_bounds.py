"""What a receiver checks itself, whatever the sender's software did (docs/mail.md):
the time window, the body cap, and an id offered twice in one outbox."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from agentpost.mail.clock import format_ts

from .conftest import offer, signed_envelope

if TYPE_CHECKING:
    from .conftest import Clone


def _stamps(start: datetime) -> dict[str, str]:
    return {"sent_at": format_ts(start), "expires_at": format_ts(start + timedelta(days=14))}


def test_an_envelope_dated_500_years_ahead_is_refused_and_stays_unacked(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    b.sync()  # pin ma's key
    future = signed_envelope(a, b, "bob", "from the future", **_stamps(datetime(2526, 1, 1, tzinfo=UTC)))
    offer(a, [future])
    report = b.sync()
    assert report["imported"] == 0
    assert {"id": future["id"], "machine": "ma", "reason": "bad_timestamp"} in report["refused"]
    assert b.inbox() == []
    assert b.sync()["refused"].count(
        {"id": future["id"], "machine": "ma", "reason": "bad_timestamp"}
    ) == 1, "still refused on the next sync: it was never imported"


def test_an_envelope_a_little_ahead_of_this_clock_is_accepted(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    b.sync()
    soon = datetime.now(UTC) + timedelta(hours=3)  # a sender whose clock runs fast
    ahead = signed_envelope(a, b, "bob", "clock skew", **_stamps(soon))
    offer(a, [ahead])
    assert b.sync()["imported"] == 1


def test_an_envelope_that_expires_before_it_was_sent_is_refused(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    b.sync()
    now = datetime.now(UTC)
    backwards = signed_envelope(
        a, b, "bob", "backwards", sent_at=format_ts(now), expires_at=format_ts(now - timedelta(seconds=1))
    )
    offer(a, [backwards])
    assert {"id": backwards["id"], "machine": "ma", "reason": "bad_timestamp"} in b.sync()["refused"]


def test_a_body_over_the_64_kib_cap_is_refused_by_the_receiver(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    b.sync()
    huge = signed_envelope(a, b, "bob", "x" * (64 * 1024 + 1))
    fits = signed_envelope(a, b, "bob", "y" * (64 * 1024))
    offer(a, [huge, fits])
    report = b.sync()
    assert report["imported"] == 1
    assert {"id": huge["id"], "machine": "ma", "reason": "body_too_large"} in report["refused"]
    assert [m["id"] for m in b.inbox()] == [fits["id"]]


def test_an_identical_envelope_offered_twice_in_one_outbox_imports_once_and_is_reported(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    b.sync()
    note = signed_envelope(a, b, "bob", "once")
    offer(a, [note, dict(note)])
    report = b.sync()
    assert report["imported"] == 1
    assert {"id": note["id"], "machine": "ma", "reason": "duplicate_id"} in report["refused"]
    assert [m["body"] for m in b.inbox()] == ["once"]


def test_two_different_envelopes_under_one_id_in_one_outbox_are_both_refused(
    two_machines: tuple[Clone, Clone],
) -> None:
    a, b = two_machines
    b.sync()
    first = signed_envelope(a, b, "bob", "version one")
    second = signed_envelope(a, b, "bob", "version two", id=first["id"])
    offer(a, [first, second])
    report = b.sync()
    assert report["imported"] == 0
    dups = [r for r in report["refused"] if r["reason"] == "duplicate_id"]
    assert dups == [{"id": first["id"], "machine": "ma", "reason": "duplicate_id"}] * 2
    assert b.inbox() == []
