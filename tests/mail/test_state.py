"""Outbox, acks, dedup and compaction are derived from the log and the clock (docs/mail.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentpost.mail.clock import format_ts
from agentpost.mail.log import Acked, Expired, Imported, Join, Pinned, Record, Retired, Sent
from agentpost.mail.state import MailState

T0 = datetime(2026, 11, 30, tzinfo=UTC)


def _sent(msg_id: str, local: bool = False) -> Sent:
    env = {
        "id": msg_id,
        "to": {"machine": "mb", "name": "bob"},
        "expires_at": format_ts(T0 + timedelta(days=14)),
    }
    return Sent(env, local=local)


def _imported(msg_id: str) -> Imported:
    return Imported(
        msg_id,
        {"machine": "mb", "name": "bob"},
        "in_1",
        format_ts(T0 + timedelta(days=14)),
        "t",
        "t",
    )


def test_outbox_holds_remote_sends_until_acked_or_expired() -> None:
    records: list[Record] = [_sent("ml_1"), _sent("ml_2"), _sent("ml_3", local=True)]
    state = MailState.from_records(records)
    assert [e["id"] for e in state.pending(T0)] == ["ml_1", "ml_2"]
    state.apply(Acked("ml_1", "mb", "t"))
    assert [e["id"] for e in state.pending(T0)] == ["ml_2"]
    later = T0 + timedelta(days=14)
    assert state.pending(later) == []
    assert [e["id"] for e in state.newly_expired(later)] == ["ml_2"]
    state.apply(Expired("ml_2", "t"))
    assert state.newly_expired(later) == [], "an expiry is reported once"


def test_acks_list_imports_until_retired_or_expired_but_dedup_outlives_retirement() -> None:
    state = MailState.from_records([_imported("ml_b"), _imported("ml_a")])
    assert state.acks(T0) == [("mb", "ml_a"), ("mb", "ml_b")]
    state.apply(Retired("ml_a", "t", "mb"))
    assert state.acks(T0) == [("mb", "ml_b")]
    assert state.seen("mb", "ml_a", T0), "a retired ack still refuses the id again"
    assert not state.seen("mb", "ml_a", T0 + timedelta(days=15))
    assert state.acks(T0 + timedelta(days=15)) == []


def test_later_pin_of_a_machine_replaces_the_earlier_one() -> None:
    state = MailState.from_records([Pinned("mb", "k1", "t1"), Pinned("mb", "k2", "t2")])
    assert state.pins["mb"].public_key == "k2"


def test_compaction_keeps_sessions_pins_outbox_and_imports_in_force() -> None:
    records: list[Record] = [
        Join("in_1", "alice", "t1"),
        Join("in_1", "alice", "t2"),
        Pinned("mb", "k", "t"),
        _sent("ml_done"),
        Acked("ml_done", "mb", "t"),
        _sent("ml_open"),
        _sent("ml_local", local=True),
        _imported("ml_in"),
        Retired("ml_in", "t", "mb"),
    ]
    state = MailState.from_records(records)
    kept = state.needed_records(T0)
    again = MailState.from_records(kept)
    assert [e["id"] for e in again.pending(T0)] == ["ml_open"]
    assert again.seen("mb", "ml_in", T0) and again.acks(T0) == []
    assert list(again.instances) == ["in_1"] and again.pins["mb"].public_key == "k"
    assert len(kept) == 5
    assert MailState.from_records(state.needed_records(T0 + timedelta(days=15))).pending(T0) == []


def test_an_import_after_retirement_acks_the_id_again() -> None:
    state = MailState.from_records([_imported("ml_a"), Retired("ml_a", "t", "mb")])
    assert state.acks(T0) == []
    state.apply(_imported("ml_a"))
    assert state.acks(T0) == [("mb", "ml_a")]
    again = MailState.from_records(state.needed_records(T0))
    assert again.acks(T0) == [("mb", "ml_a")]


def _imported_from(machine: str, msg_id: str) -> Imported:
    return Imported(
        msg_id, {"machine": machine, "name": "x"}, "in_1", format_ts(T0 + timedelta(days=14)), "t", "t"
    )


def test_the_same_id_from_two_machines_is_two_messages_each_acked_and_retired_alone() -> None:
    state = MailState.from_records([_imported_from("ma", "ml_x"), _imported_from("mc", "ml_x")])
    assert state.acks(T0) == [("ma", "ml_x"), ("mc", "ml_x")]
    assert state.seen("ma", "ml_x", T0) and state.seen("mc", "ml_x", T0)
    assert not state.seen("md", "ml_x", T0)
    assert state.other_senders_of("ma", "ml_x", T0) == ["mc"]
    state.apply(Retired("ml_x", "t", "mc"))
    assert state.acks(T0) == [("ma", "ml_x")]


def test_a_retirement_written_before_keyed_acks_retires_the_one_import_of_its_id() -> None:
    # The previous version wrote Retired lines without a machine; they must still count.
    state = MailState.from_records([_imported_from("ma", "ml_old"), Retired("ml_old", "t")])
    assert state.acks(T0) == []
    kept = state.needed_records(T0)
    assert Retired("ml_old", "t", "ma") in kept, "compaction writes the keyed form"
    assert MailState.from_records(kept).acks(T0) == []
