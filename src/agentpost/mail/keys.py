"""The machine's ed25519 key: made on first use, kept in `.git/agentpost/` (docs/mail.md).

Only the public half leaves the machine, inside presence. Signatures are base64
of the raw 64-byte ed25519 signature; public keys are base64 of the raw 32 bytes.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agentpost.mail.errors import StateUnreadable
from agentpost.mail.fsio import atomic_write


class MachineKey:
    """This machine's signing key."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        raw = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.public_b64 = base64.b64encode(raw).decode("ascii")

    @classmethod
    def generate(cls) -> MachineKey:
        return cls(Ed25519PrivateKey.generate())

    def sign(self, data: bytes) -> str:
        """Base64 ed25519 signature of `data`."""
        return base64.b64encode(self._private.sign(data)).decode("ascii")

    def private_bytes(self) -> bytes:
        return self._private.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )


def load_key(path: Path) -> MachineKey | None:
    """The stored key, None when there is none; a damaged key file fails closed."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    if len(raw) != 32:
        raise StateUnreadable(
            f"{path} is not a 32-byte ed25519 key; move it away to make a new one"
        )
    return MachineKey(Ed25519PrivateKey.from_private_bytes(raw))


def load_or_create_key(path: Path) -> MachineKey:
    """The stored key, or a new one written atomically with mode 0600."""
    key = load_key(path)
    if key is None:
        key = MachineKey.generate()
        atomic_write(path, key.private_bytes(), mode=0o600)
    return key


# Document signatures are over this prefix + the message, so no document signature can
# ever be replayed as an envelope signature or the other way round.
_DOCUMENT_DOMAIN = b"agentpost mail ref document\n"


def sign_document(key: MachineKey, message: bytes) -> str:
    """Signature of a ref document's exact message bytes (carried in the commit header)."""
    return key.sign(_DOCUMENT_DOMAIN + message)


def document_signed(public_b64: str, signature: str | None, message: bytes) -> bool:
    return signature is not None and verify(public_b64, signature, _DOCUMENT_DOMAIN + message)


def verify(public_b64: str, sig_b64: str, data: bytes) -> bool:
    """True when `sig_b64` is a valid signature of `data` by `public_b64`; never raises."""
    try:
        public = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_b64, validate=True))
        public.verify(base64.b64decode(sig_b64, validate=True), data)
    except (InvalidSignature, ValueError, binascii.Error, TypeError):
        return False
    return True
