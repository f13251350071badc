"""Identifiers: time-sortable event ids, random tokens and their hashes."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import time

# A room post's Idempotency-Key as the hub takes it (docs/api.md): it travels in a header.
IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")
IDEMPOTENCY_KEY_RULE = "1-255 visible ASCII characters (no spaces, no accents)"

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid(now_ms: int | None = None) -> str:
    """A 26-character ULID: 48-bit millisecond time, 80 random bits, Crockford base32."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    out = []
    for _ in range(26):
        out.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(out))


def new_id(prefix: str) -> str:
    """`<prefix>_<ULID>`, e.g. `ev_01J…` for events (docs/api.md)."""
    return f"{prefix}_{ulid()}"


def new_token() -> str:
    """A member or admin token: 32 random bytes, URL-safe text."""
    return "ap_" + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    """Tokens are stored hashed; 32 random bytes need no slow KDF, sha256 suffices."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
