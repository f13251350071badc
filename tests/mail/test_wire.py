"""Ref documents: capped, shape-checked, compared without their timestamps."""

from __future__ import annotations

import json

import pytest

from agentpost.mail.limits import MAX_REF_BYTES
from agentpost.mail.wire import (
    DocumentError,
    InstanceEntry,
    MailDoc,
    PresenceDoc,
    content_digest,
    decode_mail,
    decode_presence,
    encode,
)


def test_documents_round_trip_with_exactly_the_design_keys() -> None:
    mail = MailDoc("ma", "2026-11-30T00:00:00.000Z", [{"id": "ml_1"}], ["ml_2"])
    assert decode_mail(encode(mail)) == mail
    assert set(json.loads(encode(mail))) == {"machine", "updated_at", "outbox", "acks"}
    presence = PresenceDoc("ma", "t", "key", [InstanceEntry("in_1", "alice", "t")])
    assert decode_presence(encode(presence)) == presence
    assert set(json.loads(encode(presence))) == {"machine", "updated_at", "public_key", "instances"}


def test_a_message_over_the_cap_is_refused_before_parsing() -> None:
    with pytest.raises(DocumentError) as err:
        decode_mail(b" " * (MAX_REF_BYTES + 1))
    assert err.value.reason == "too_large"


@pytest.mark.parametrize(
    "message",
    [
        b"not json",
        b"[]",
        b'{"machine": "ma"}',
        b'{"machine":"ma","updated_at":"t","outbox":{},"acks":[]}',
    ],
)
def test_off_shape_messages_are_corrupt(message: bytes) -> None:
    with pytest.raises(DocumentError) as err:
        decode_mail(message)
    assert err.value.reason == "corrupt_ref"


def test_content_digest_ignores_timestamps_only() -> None:
    a = MailDoc("ma", "t1", [], ["ml_1"])
    assert content_digest(a) == content_digest(MailDoc("ma", "t2", [], ["ml_1"]))
    assert content_digest(a) != content_digest(MailDoc("ma", "t1", [], ["ml_2"]))
    p1 = PresenceDoc("ma", "t1", "k", [InstanceEntry("in_1", "alice", "t1")])
    p2 = PresenceDoc("ma", "t2", "k", [InstanceEntry("in_1", "alice", "t9")])
    assert content_digest(p1) == content_digest(p2)
    assert content_digest(p1) != content_digest(PresenceDoc("ma", "t1", "k2", p1.instances))
