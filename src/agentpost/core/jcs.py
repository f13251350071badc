"""Canonical JSON (RFC 8785, JCS) and the digests built on it.

Every fingerprint and every derived key in agentpost hashes the JCS form, so two
equal JSON values always give the same digest (DESIGN.md §3, §5, §6, §7).
"""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785

JSONValue = None | bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"]


def canonical(value: object) -> bytes:
    """The RFC 8785 serialization of `value` (UTF-8 bytes)."""
    data: Any = value
    return rfc8785.dumps(data)


def sha256_hex(value: object) -> str:
    """Hex sha256 of the canonical form of `value`."""
    return hashlib.sha256(canonical(value)).hexdigest()
