"""Canonical JSON (RFC 8785, JCS) and the digests built on it.

Every fingerprint and every derived key in agentpost hashes the JCS form, so two
equal JSON values always give the same digest (DESIGN.md §3, §5, §6, §7).
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

from agentpost.core.errors import Code, RequestError

JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]


class NotCanonicalizable(RequestError):
    """A value JCS cannot represent exactly (an integer beyond ±(2**53 - 1))."""

    def __init__(self, detail: str) -> None:
        super().__init__(Code.INVALID_REQUEST, f"value cannot be canonicalized: {detail}")


def canonical(value: object) -> bytes:
    """The RFC 8785 serialization of `value` (UTF-8 bytes)."""
    data: Any = value
    try:
        return rfc8785.dumps(data)
    except rfc8785.CanonicalizationError as exc:
        raise NotCanonicalizable(str(exc)) from exc


def sha256_hex(value: object) -> str:
    """Hex sha256 of the canonical form of `value`."""
    return hashlib.sha256(canonical(value)).hexdigest()
