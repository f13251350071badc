"""The envelope: one signed note from a session on one machine to a session on another.

Shape and signature rule are docs/mail.md: `sig` is base64 ed25519 over the JCS of
the envelope without `sig`. Verification always runs on the dict exactly as it was
received, so no re-encoding can change what was signed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from agentpost.core.ids import new_id
from agentpost.core.jcs import canonical
from agentpost.mail.clock import format_ts, parse_ts
from agentpost.mail.keys import MachineKey, verify
from agentpost.mail.limits import MESSAGE_TTL
from agentpost.mail.repo import is_safe_id

# An envelope exactly as signed or received: a JSON object, checked by `decode`.
RawEnvelope = dict[str, Any]


class Address(msgspec.Struct, frozen=True, omit_defaults=True):
    """A session: the machine, its instance id (optional for `to`), its name."""

    machine: str
    name: str
    instance_id: str | None = None


class Envelope(msgspec.Struct, frozen=True):
    id: str
    from_: Address = msgspec.field(name="from")
    to: Address
    body: str
    sent_at: str
    expires_at: str
    sig: str | None = None

    def expired(self, now: datetime) -> bool:
        return parse_ts(self.expires_at) <= now


def new_envelope(sender: Address, to: Address, body: str, now: datetime) -> RawEnvelope:
    """An unsigned envelope dict, expiring after MESSAGE_TTL."""
    return {
        "id": new_id("ml"),
        "from": msgspec.to_builtins(sender),
        "to": msgspec.to_builtins(to),
        "body": body,
        "sent_at": format_ts(now),
        "expires_at": format_ts(now + MESSAGE_TTL),
    }


def signing_bytes(raw: RawEnvelope) -> bytes:
    """What the signature covers: JCS of every field except `sig`."""
    return canonical({k: v for k, v in raw.items() if k != "sig"})


def sign(raw: RawEnvelope, key: MachineKey) -> RawEnvelope:
    """`raw` with its `sig` set by this machine's key."""
    unsigned = {k: v for k, v in raw.items() if k != "sig"}
    return {**unsigned, "sig": key.sign(signing_bytes(unsigned))}


def signature_valid(raw: RawEnvelope, public_b64: str) -> bool:
    sig = raw.get("sig")
    return isinstance(sig, str) and verify(public_b64, sig, signing_bytes(raw))


def decode(raw: object) -> Envelope:
    """The typed envelope, or ValueError naming what is wrong with it."""
    try:
        env = msgspec.convert(raw, Envelope)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from exc
    if not is_safe_id(env.id):
        raise ValueError(f"envelope id {env.id!r} is not a safe id")
    try:
        sent, expires = parse_ts(env.sent_at), parse_ts(env.expires_at)
    except ValueError as exc:
        raise ValueError(f"bad timestamp: {exc}") from exc
    # A sender cannot stretch a message's life past the 14 days docs/mail.md allows.
    if expires - sent > MESSAGE_TTL:
        raise ValueError("expires_at is more than 14 days after sent_at")
    return env
