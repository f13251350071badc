"""Canonical JSON (RFC 8785, JCS) and the digests built on it.

Every fingerprint and every derived key in agentpost hashes the JCS form, so two
equal JSON values always give the same digest (docs/api.md, docs/threads.md, docs/connect.md, docs/mail.md).
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
import rfc8785

from agentpost.core.errors import Code, RequestError

JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]


class NotCanonicalizable(RequestError):
    """A value JCS cannot represent exactly (an integer beyond ±(2**53 - 1))."""

    def __init__(self, detail: str) -> None:
        super().__init__(Code.INVALID_REQUEST, f"value cannot be canonicalized: {detail}")


_SAFE_INT = 2**53 - 1
_encode_sorted = msgspec.json.Encoder(order="sorted").encode


def _plain(value: object) -> bool:
    """True when msgspec's sorted-key JSON of `value` is byte-for-byte its JCS form: no
    floats (JCS has its own number format), integers in JCS's domain, and object keys in
    ASCII (JCS sorts by UTF-16 code units, msgspec by code points; ASCII agrees).
    String escaping is the same in both (property-tested in tests/unit)."""
    if value is None or isinstance(value, str | bool):
        return True
    if isinstance(value, int):
        return -_SAFE_INT <= value <= _SAFE_INT
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and k.isascii() and _plain(v) for k, v in value.items())
    return False


def canonical(value: object) -> bytes:
    """The RFC 8785 serialization of `value` (UTF-8 bytes). Plain values take a fast path
    (msgspec, C); anything else goes through the reference implementation."""
    if _plain(value):
        return _encode_sorted(value)
    data: Any = value
    try:
        return rfc8785.dumps(data)
    except rfc8785.CanonicalizationError as exc:
        raise NotCanonicalizable(str(exc)) from exc


def sha256_hex(value: object) -> str:
    """Hex sha256 of the canonical form of `value`."""
    return hashlib.sha256(canonical(value)).hexdigest()
