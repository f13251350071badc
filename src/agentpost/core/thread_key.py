"""The command id of a thread send (docs/threads.md): a caller's key bound to its thread, its
sender and whom the sender acts for, so the same key names one message everywhere — in every
process and after every restart — and never a message of another thread or sender.
"""

from __future__ import annotations

import hashlib

PREFIX = "cmd_"
MAX_KEY_BYTES = 255
ACTING_FOR_ENV = "AGENTPOST_ACTING_FOR"


class InvalidKey(ValueError):
    """The caller's key cannot name a command (empty, or over 255 bytes of UTF-8)."""


def check_key(key: str) -> str:
    """The key if it can name a command: 1-255 bytes of UTF-8 (docs/api.md's bound)."""
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidKey("the idempotency key is not valid UTF-8") from None
    if size == 0:
        raise InvalidKey("the idempotency key must not be empty")
    if size > MAX_KEY_BYTES:
        raise InvalidKey(f"the idempotency key is {size} bytes; at most {MAX_KEY_BYTES}")
    return key


def length_delimited(*fields: str) -> bytes:
    """Each field as a u32 big-endian byte length, then its UTF-8 bytes: no two field
    lists encode alike (a plain join would make ("ab", "c") equal ("a", "bc"))."""
    out = bytearray()
    for f in fields:
        raw = f.encode("utf-8")
        out += len(raw).to_bytes(4, "big")
        out += raw
    return bytes(out)


def command_id(key: str, thread_id: str, sender: str, acting_for: str = "") -> str:
    """`cmd_` + hex sha256 of the length-delimited (key, thread id, sender, acting_for):
    the Idempotency-Key a thread send gives the hub (73 visible ASCII characters)."""
    check_key(key)
    digest = hashlib.sha256(length_delimited(key, thread_id, sender, acting_for)).hexdigest()
    return PREFIX + digest
