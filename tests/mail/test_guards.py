"""Guards for the classes of bug behind the hardening fixes (docs/mail.md), by property:

- nothing in the inbox, dedup or acks is keyed by the bare envelope id;
- a receiver's time window holds for any `sent_at`;
- no unreadable line other than a torn tail is ever skipped in the log.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentpost.mail import importer
from agentpost.mail.clock import format_ts
from agentpost.mail.envelope import Address, new_envelope, sign
from agentpost.mail.errors import StateUnreadable
from agentpost.mail.inbox import Delivery, Inbox, InboxMessage
from agentpost.mail.keys import MachineKey
from agentpost.mail.log import Imported, Join, MailLog, Pinned
from agentpost.mail.state import MailState

NOW = datetime(2026, 11, 30, tzinfo=UTC)
MACHINES = ["aa", "ma", "mc"]
KEYS = {m: MachineKey.generate() for m in MACHINES}
notes = st.lists(
    st.tuples(st.sampled_from(MACHINES), st.sampled_from(["ml_1", "ml_2", "ml_3"])),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(offered=notes)
def test_every_machine_and_id_pair_is_its_own_message_in_inbox_dedup_and_acks(
    tmp_path_factory: pytest.TempPathFactory, offered: list[tuple[str, str]]
) -> None:
    inbox = Inbox(tmp_path_factory.mktemp("inbox"), "in_b")
    state = MailState.from_records([Join("in_b", "bob", "t")])
    expires = format_ts(NOW + timedelta(days=14))
    delivered: list[tuple[str, str]] = []
    for machine, msg_id in offered:
        message = InboxMessage(
            id=msg_id,
            sender={"machine": machine, "name": "x"},
            to={"machine": "mb", "name": "bob"},
            body=f"{machine} {msg_id}",
            sent_at=format_ts(NOW),
            expires_at=expires,
        )
        seen_before = state.seen(machine, msg_id, NOW)
        outcome = inbox.deliver(message)
        assert (outcome is Delivery.DUPLICATE) == seen_before
        if outcome is Delivery.DELIVERED:
            delivered.append((machine, msg_id))
            state.apply(Imported(msg_id, message.sender, "in_b", expires, "t", "t"))
    distinct = sorted(set(offered))
    assert sorted(delivered) == distinct, "each pair once, none hidden by another machine's"
    assert state.acks(NOW) == distinct
    assert sorted(m.key for m in inbox.unread()) == distinct
    assert {m.body for m in inbox.unread()} == {f"{m} {i}" for m, i in distinct}


@settings(max_examples=60, deadline=None)
@given(hours_ahead=st.integers(min_value=-24 * 20, max_value=24 * 365 * 600))
def test_a_receiver_accepts_a_sent_at_only_within_its_window(hours_ahead: int) -> None:
    state = MailState.from_records([Join("in_b", "bob", "t"), Pinned("ma", KEYS["ma"].public_b64, "t")])
    sent = NOW + timedelta(hours=hours_ahead)
    raw = sign(new_envelope(Address("ma", "alice", "in_a"), Address("mb", "bob"), "hi", sent), KEYS["ma"])
    verdict = importer.judge(raw, "ma", "mb", state, set(), NOW)
    if hours_ahead > 24:
        assert (verdict.action, verdict.reason) == (importer.REFUSE, importer.BAD_TIMESTAMP)
    elif hours_ahead <= -24 * 14:
        assert (verdict.action, verdict.reason) == (importer.REFUSE, importer.EXPIRED)
    else:
        assert verdict.action == importer.ACCEPT


@settings(max_examples=40, deadline=None)
@given(
    count=st.integers(min_value=2, max_value=8),
    data=st.data(),
)
def test_any_unreadable_line_but_a_torn_tail_stops_the_log(
    tmp_path_factory: pytest.TempPathFactory, count: int, data: st.DataObject
) -> None:
    log = MailLog(tmp_path_factory.mktemp("log") / "log.jsonl")
    log.append([Join(f"in_{i}", f"s{i}", "t") for i in range(count)])
    lines = log.path.read_bytes().splitlines()
    hole = data.draw(st.integers(min_value=0, max_value=count - 1))
    garbage = data.draw(st.binary(min_size=1, max_size=30).filter(lambda b: b"\n" not in b))
    lines[hole] = lines[hole][: len(lines[hole]) // 2] + garbage
    torn_tail = hole == count - 1 and data.draw(st.booleans())
    body = b"\n".join(lines) + (b"" if torn_tail else b"\n")
    Path(log.path).write_bytes(body)
    try:
        read = log.read()
    except StateUnreadable as exc:
        assert not torn_tail
        assert f"line {hole + 1} of" in exc.message
        return
    # Readable: only a torn tail was skipped (or the damage still parsed as a record).
    assert read.skipped <= 1 and (read.skipped == 0 or torn_tail)
    assert len(read.records) + read.skipped == count
