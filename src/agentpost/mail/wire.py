"""The two ref documents, presence and mail, as they travel (docs/mail.md).

A document is the JSON message of a parentless commit. Encoding is JCS (stable
bytes for equal content); decoding refuses anything over MAX_REF_BYTES or off-shape.
Envelopes inside a mail document stay raw dicts so signatures are checked on what
was received.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from agentpost.core.jcs import canonical
from agentpost.mail.limits import MAX_REF_BYTES


class InstanceEntry(msgspec.Struct, frozen=True):
    instance_id: str
    name: str
    last_seen: str


class PresenceDoc(msgspec.Struct, frozen=True):
    machine: str
    updated_at: str
    public_key: str
    instances: list[InstanceEntry]


class MailDoc(msgspec.Struct, frozen=True):
    machine: str
    updated_at: str
    outbox: list[dict[str, Any]]
    acks: list[str]


class DocumentError(ValueError):
    """A ref message that cannot be used; `reason` is the refusal code reported by sync."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


def presence_ref(machine: str) -> str:
    return f"refs/agentpost/presence/{machine}"


def mail_ref(machine: str) -> str:
    return f"refs/agentpost/mail/{machine}"


def ack_entry(machine: str, msg_id: str) -> str:
    """One entry of a mail document's `acks`: `<sender machine>/<envelope id>`.

    Keyed by the sender machine, so one machine's ack names exactly one machine's note:
    a note that reuses another machine's id can never acknowledge it (docs/mail.md).
    Neither part can contain `/` (see repo.check_name and repo.is_safe_id).
    """
    return f"{machine}/{msg_id}"


def encode(doc: PresenceDoc | MailDoc) -> bytes:
    return canonical(msgspec.to_builtins(doc)) + b"\n"


def decode_presence(message: bytes) -> PresenceDoc:
    return _decode(message, PresenceDoc)


def decode_mail(message: bytes) -> MailDoc:
    return _decode(message, MailDoc)


_Doc = TypeVar("_Doc", PresenceDoc, MailDoc)


def _decode(message: bytes, kind: type[_Doc]) -> _Doc:
    if len(message) > MAX_REF_BYTES:
        raise DocumentError("too_large", f"ref message of {len(message)} bytes exceeds the cap")
    try:
        return msgspec.json.decode(message, type=kind)
    except msgspec.DecodeError as exc:
        raise DocumentError("corrupt_ref", f"ref message is not a {kind.__name__}: {exc}") from exc


def content_digest(doc: PresenceDoc | MailDoc) -> bytes:
    """The document without `updated_at`: two publications with equal digests say the same."""
    body = msgspec.to_builtins(doc)
    body.pop("updated_at", None)
    if isinstance(doc, PresenceDoc):
        # last_seen moves with every join; it does not by itself warrant a push.
        body["instances"] = [
            {k: v for k, v in inst.items() if k != "last_seen"} for inst in body["instances"]
        ]
    return canonical(body)
