"""The acceptance rules for one envelope, in order (docs/mail.md), without git."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from agentpost.mail import importer
from agentpost.mail.envelope import Address, new_envelope, sign
from agentpost.mail.keys import MachineKey
from agentpost.mail.log import Imported, Join, Pinned
from agentpost.mail.state import MailState

NOW = datetime(2026, 11, 30, tzinfo=UTC)
KEY = MachineKey.generate()


def _state(pinned: bool = True) -> MailState:
    state = MailState.from_records([Join("in_b", "bob", "t")])
    if pinned:
        state.apply(Pinned("ma", KEY.public_b64, "t"))
    return state


def _raw(to_machine: str = "mb", to_name: str = "bob") -> dict[str, object]:
    env = new_envelope(Address("ma", "alice", "in_a"), Address(to_machine, to_name), "hi", NOW)
    return sign(env, KEY)


def _judge(
    raw: object,
    state: MailState | None = None,
    ref: str = "ma",
    changed: set[str] | None = None,
    now: datetime = NOW,
) -> importer.Verdict:
    return importer.judge(raw, ref, "mb", state or _state(), changed or set(), now)


def test_a_valid_envelope_for_a_local_session_is_accepted() -> None:
    verdict = _judge(_raw())
    assert verdict.action == importer.ACCEPT
    assert verdict.recipient is not None and verdict.recipient.instance_id == "in_b"


def test_mail_for_other_machines_is_skipped_silently() -> None:
    assert _judge(_raw(to_machine="mc")).action == importer.SKIP


def test_each_refusal_names_its_reason() -> None:
    raw = _raw()
    assert _judge("nonsense").reason == importer.MALFORMED
    assert _judge({**raw, "id": "../x"}).reason == importer.MALFORMED
    assert _judge(raw, ref="mc").reason == importer.SENDER_MISMATCH
    assert _judge(raw, now=NOW + timedelta(days=14)).reason == importer.EXPIRED
    assert _judge({k: v for k, v in raw.items() if k != "sig"}).reason == importer.MISSING_SIGNATURE
    assert _judge(raw, changed={"ma"}).reason == importer.KEY_CHANGED
    assert _judge(raw, state=_state(pinned=False)).reason == importer.UNKNOWN_KEY
    assert _judge({**raw, "body": "changed"}).reason == importer.BAD_SIGNATURE
    assert _judge(_raw(to_name="carol")).reason == importer.NO_RECIPIENT


def test_an_id_already_imported_is_skipped_not_refused() -> None:
    raw = _raw()
    state = _state()
    state.apply(
        Imported(str(raw["id"]), {"machine": "ma"}, "in_b", str(raw["expires_at"]), "t", "t")
    )
    assert _judge(raw, state=state).action == importer.SKIP


def test_the_same_id_imported_from_another_machine_does_not_make_this_one_a_duplicate() -> None:
    raw = _raw()
    state = _state()
    state.apply(
        Imported(str(raw["id"]), {"machine": "mc"}, "in_b", str(raw["expires_at"]), "t", "t")
    )
    assert _judge(raw, state=state).action == importer.ACCEPT
