"""Inboxes deduplicate by id, hold a bounded number of unread messages, keep read ones."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from agentpost.mail.clock import parse_ts
from agentpost.mail.errors import StateUnreadable
from agentpost.mail.inbox import Delivery, Inbox, InboxMessage


def _msg(
    msg_id: str, expires_at: str = "2026-12-14T00:00:00.000Z", machine: str = "ma"
) -> InboxMessage:
    return InboxMessage(
        id=msg_id,
        sender={"machine": machine, "name": "alice"},
        to={"machine": "mb", "name": "bob"},
        body=f"body {msg_id}",
        sent_at="2026-11-30T00:00:00.000Z",
        expires_at=expires_at,
    )


def test_a_duplicate_id_is_refused_even_after_it_was_read(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path, "in_1")
    assert inbox.deliver(_msg("ml_1")) is Delivery.DELIVERED
    assert inbox.deliver(_msg("ml_1")) is Delivery.DUPLICATE
    inbox.mark_read([("ma", "ml_1")])
    assert inbox.deliver(_msg("ml_1")) is Delivery.DUPLICATE
    assert [m.id for m in inbox.read_messages()] == ["ml_1"]
    assert inbox.unread() == []


def test_a_full_inbox_refuses_until_messages_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTPOST_MAIL_INBOX_CAPACITY", "2")
    inbox = Inbox(tmp_path, "in_1")
    assert inbox.deliver(_msg("ml_1")) is Delivery.DELIVERED
    assert inbox.deliver(_msg("ml_2")) is Delivery.DELIVERED
    assert inbox.deliver(_msg("ml_3")) is Delivery.FULL
    inbox.mark_read([("ma", "ml_1")])
    assert inbox.deliver(_msg("ml_3")) is Delivery.DELIVERED
    assert [m.id for m in inbox.unread()] == ["ml_2", "ml_3"]


def test_prune_drops_only_read_messages_past_expiry(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path, "in_1")
    inbox.deliver(_msg("ml_old", "2026-12-01T00:00:00.000Z"))
    inbox.deliver(_msg("ml_new"))
    inbox.deliver(_msg("ml_unread", "2026-12-01T00:00:00.000Z"))
    inbox.mark_read([("ma", "ml_old"), ("ma", "ml_new")])
    assert inbox.prune_read(parse_ts("2026-12-02T00:00:00Z")) == 1
    assert [m.id for m in inbox.read_messages()] == ["ml_new"]
    assert [m.id for m in inbox.unread()] == ["ml_unread"]


def test_two_machines_notes_with_one_id_are_two_messages(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path, "in_1")
    assert inbox.deliver(_msg("ml_1", machine="ma")) is Delivery.DELIVERED
    assert inbox.deliver(_msg("ml_1", machine="mc")) is Delivery.DELIVERED
    assert inbox.holds("ma", "ml_1") and inbox.holds("mc", "ml_1")
    assert not inbox.holds("md", "ml_1")
    inbox.mark_read([("mc", "ml_1")])
    assert [m.key for m in inbox.unread()] == [("ma", "ml_1")]


def test_files_named_by_an_earlier_version_are_renamed_and_still_deduplicate(
    tmp_path: Path,
) -> None:
    new, cur = tmp_path / "in_1" / "new", tmp_path / "in_1" / "cur"
    for folder in (new, cur, tmp_path / "in_1" / "tmp"):
        folder.mkdir(parents=True)
    (new / "ml_1.json").write_bytes(msgspec.json.encode(_msg("ml_1")))
    (cur / "ml_2.json").write_bytes(msgspec.json.encode(_msg("ml_2", machine="mc")))
    inbox = Inbox(tmp_path, "in_1")
    assert [m.key for m in inbox.unread()] == [("ma", "ml_1")]
    assert [m.key for m in inbox.read_messages()] == [("mc", "ml_2")]
    assert sorted(p.name for p in new.iterdir()) == ["ml_1@ma.json"]
    assert sorted(p.name for p in cur.iterdir()) == ["ml_2@mc.json"]
    assert inbox.deliver(_msg("ml_2", machine="mc")) is Delivery.DUPLICATE


def test_an_unreadable_file_of_an_earlier_version_stops_the_inbox(tmp_path: Path) -> None:
    new = tmp_path / "in_1" / "new"
    new.mkdir(parents=True)
    (new / "ml_1.json").write_bytes(b"{half a mess")
    with pytest.raises(StateUnreadable) as err:
        Inbox(tmp_path, "in_1").unread()
    assert err.value.code == "state_unreadable"
    assert "move it out of" in err.value.message
    assert (new / "ml_1.json").exists(), "nothing is deleted"
