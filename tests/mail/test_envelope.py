"""Envelopes and signatures: sig is ed25519 over the JCS of the envelope without `sig`
(docs/mail.md)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentpost.core.jcs import canonical
from agentpost.mail.envelope import (
    Address,
    decode,
    new_envelope,
    sign,
    signature_valid,
    signing_bytes,
)
from agentpost.mail.keys import MachineKey, verify

KEY = MachineKey.generate()
OTHER = MachineKey.generate()
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

names = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,20}", fullmatch=True)
bodies = st.text(min_size=1, max_size=300)


def _envelope(body: str = "hi", sender: str = "alice", to: str = "bob") -> dict[str, object]:
    return new_envelope(Address("ma", sender, "in_1"), Address("mb", to), body, NOW)


@settings(max_examples=60, deadline=None)
@given(body=bodies, sender=names, to=names)
def test_signed_envelope_verifies_and_survives_a_json_round_trip(
    body: str, sender: str, to: str
) -> None:
    raw = sign(_envelope(body, sender, to), KEY)
    travelled = json.loads(json.dumps(raw))
    assert signature_valid(travelled, KEY.public_b64)
    assert decode(travelled).body == body


@settings(max_examples=60, deadline=None)
@given(body=bodies, other=bodies)
def test_any_change_to_a_signed_field_breaks_the_signature(body: str, other: str) -> None:
    raw = sign(_envelope(body), KEY)
    if other != body:
        assert not signature_valid({**raw, "body": other}, KEY.public_b64)
    assert not signature_valid({**raw, "to": {"machine": "mc", "name": "bob"}}, KEY.public_b64)
    assert not signature_valid({**raw, "expires_at": "2027-01-01T00:00:00.000Z"}, KEY.public_b64)


@settings(max_examples=40, deadline=None)
@given(body=bodies)
def test_signature_does_not_depend_on_key_order(body: str) -> None:
    raw = sign(_envelope(body), KEY)
    reordered = dict(reversed(list(raw.items())))
    assert signing_bytes(reordered) == signing_bytes(raw)
    assert signature_valid(reordered, KEY.public_b64)


def test_signature_covers_the_jcs_of_the_envelope_without_sig() -> None:
    raw = sign(_envelope(), KEY)
    unsigned = {k: v for k, v in raw.items() if k != "sig"}
    assert verify(KEY.public_b64, str(raw["sig"]), canonical(unsigned))
    assert len(base64.b64decode(str(raw["sig"]))) == 64


def test_another_machines_key_does_not_verify() -> None:
    assert not signature_valid(sign(_envelope(), KEY), OTHER.public_b64)


def test_missing_or_garbage_signature_is_invalid_not_an_exception() -> None:
    raw = _envelope()
    assert not signature_valid(raw, KEY.public_b64)
    assert not signature_valid({**raw, "sig": "not base64!"}, KEY.public_b64)
    assert not signature_valid({**raw, "sig": 7}, KEY.public_b64)
    assert not signature_valid(sign(raw, KEY), "bm90IGEga2V5")


def test_decode_keeps_a_missing_signature_visible() -> None:
    assert decode(_envelope()).sig is None


@pytest.mark.parametrize(
    "change",
    [
        {"id": "../../etc/passwd"},
        {"id": ""},
        {"body": 5},
        {"sent_at": "yesterday"},
        {"expires_at": "2026-11-30T12:00:00"},
        {"from": {"machine": "ma"}},
    ],
)
def test_decode_refuses_malformed_envelopes(change: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        decode({**_envelope(), **change})


def test_decode_refuses_a_life_longer_than_14_days() -> None:
    raw = _envelope()
    raw["expires_at"] = (NOW + timedelta(days=15)).isoformat()
    with pytest.raises(ValueError, match="14 days"):
        decode(raw)


def test_new_envelope_expires_after_14_days() -> None:
    env = decode(_envelope())
    assert env.expired(NOW + timedelta(days=14))
    assert not env.expired(NOW + timedelta(days=13, hours=23))
