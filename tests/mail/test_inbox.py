"""Inboxes deduplicate by id, hold a bounded number of unread messages, keep read ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentpost.mail.clock import parse_ts
from agentpost.mail.inbox import Delivery, Inbox, InboxMessage


def _msg(msg_id: str, expires_at: str = "2026-12-14T00:00:00.000Z") -> InboxMessage:
    return InboxMessage(
        id=msg_id,
        sender={"machine": "ma", "name": "alice"},
        to={"machine": "mb", "name": "bob"},
        body=f"body {msg_id}",
        sent_at="2026-11-30T00:00:00.000Z",
        expires_at=expires_at,
    )


def test_a_duplicate_id_is_refused_even_after_it_was_read(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path, "in_1")
    assert inbox.deliver(_msg("ml_1")) is Delivery.DELIVERED
    assert inbox.deliver(_msg("ml_1")) is Delivery.DUPLICATE
    inbox.mark_read(["ml_1"])
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
    inbox.mark_read(["ml_1"])
    assert inbox.deliver(_msg("ml_3")) is Delivery.DELIVERED
    assert [m.id for m in inbox.unread()] == ["ml_2", "ml_3"]


def test_prune_drops_only_read_messages_past_expiry(tmp_path: Path) -> None:
    inbox = Inbox(tmp_path, "in_1")
    inbox.deliver(_msg("ml_old", "2026-12-01T00:00:00.000Z"))
    inbox.deliver(_msg("ml_new"))
    inbox.deliver(_msg("ml_unread", "2026-12-01T00:00:00.000Z"))
    inbox.mark_read(["ml_old", "ml_new"])
    assert inbox.prune_read(parse_ts("2026-12-02T00:00:00Z")) == 1
    assert [m.id for m in inbox.read_messages()] == ["ml_new"]
    assert [m.id for m in inbox.unread()] == ["ml_unread"]
