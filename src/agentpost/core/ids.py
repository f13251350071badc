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

# The shapes of what a client names in a URL path (docs/api.md): `<prefix>_` + a ULID for
# ids, and the hub's names. Anything else names nothing, and is refused before a URL is made.
_ULID = "[0-9A-HJKMNP-TV-Z]{26}"
ROOM_ID = re.compile(f"rm_{_ULID}")
EVENT_ID = re.compile(f"ev_{_ULID}")
MEDIA_ID = re.compile(f"md_{_ULID}")
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
ROOM_ID_RULE = "a room id: `rm_` and 26 Crockford base32 characters"
EVENT_ID_RULE = "an event id: `ev_` and 26 Crockford base32 characters"
NAME_RULE = (
    "a name: 1-63 characters, lowercase letters a-z, digits, `-` and `_`, "
    "starting with a letter or a digit (e.g. `alice`, `build-bot`)"
)


def schema_pattern(shape: re.Pattern[str]) -> str:
    """The shape as a JSON Schema `pattern` (which searches): anchored at both ends, and
    `(?!\\n)` because Python's `$` also matches before a final newline, JSON Schema's not."""
    return f"^(?:{shape.pattern})(?!\\n)$"


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
