"""The machine key: made once, kept private, fails closed when damaged (docs/mail.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentpost.core.jcs import canonical
from agentpost.mail.errors import StateUnreadable
from agentpost.mail.keys import (
    MachineKey,
    document_signed,
    load_key,
    load_or_create_key,
    sign_document,
    verify,
)


def test_the_key_is_created_once_with_mode_0600_and_reloaded(tmp_path: Path) -> None:
    path = tmp_path / "machine.key"
    assert load_key(path) is None
    first = load_or_create_key(path)
    assert (path.stat().st_mode & 0o777) == 0o600
    assert load_or_create_key(path).public_b64 == first.public_b64


def test_a_damaged_key_file_fails_closed(tmp_path: Path) -> None:
    path = tmp_path / "machine.key"
    path.write_bytes(b"short")
    with pytest.raises(StateUnreadable):
        load_or_create_key(path)
    assert path.read_bytes() == b"short", "never replaced silently"


def test_document_and_envelope_signatures_cannot_stand_in_for_each_other() -> None:
    key = MachineKey.generate()
    message = canonical({"machine": "ma", "outbox": [], "acks": ["ml_1"], "updated_at": "t"})
    doc_sig = sign_document(key, message)
    assert document_signed(key.public_b64, doc_sig, message)
    assert not verify(key.public_b64, doc_sig, message)
    assert not document_signed(key.public_b64, key.sign(message), message)
    assert not document_signed(key.public_b64, None, message)
    assert not document_signed(MachineKey.generate().public_b64, doc_sig, message)
