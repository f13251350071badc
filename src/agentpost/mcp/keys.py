"""Keys of the posting tools (docs/mcp.md).

A caller's `idempotency_key` is the hub key as given (per member, as everywhere). Without
one, the key derives from this server process's random session id, the tool and its
canonical arguments: an identical retry in the same session replays instead of posting
again, and another session (a restarted agent) never collides with it.

An upload's canonical arguments name the file itself, not the path as typed: the judged
descriptor's (device, inode), the name sent and the sha256 of its bytes. `small.txt`,
`./small.txt` and the absolute path are one upload; the same path with new bytes is a new one.
"""

from __future__ import annotations

import os
import secrets

from agentpost.core.jcs import JSONValue, sha256_hex

PREFIX = "mcp_"
GIVEN = "given"
DERIVED = "derived"


def new_session_id() -> str:
    return secrets.token_hex(16)


def derived_key(session_id: str, tool: str, arguments: dict[str, JSONValue]) -> str:
    """`mcp_` + hex sha256 of the JCS of [session id, tool, arguments] (68 visible ASCII)."""
    return PREFIX + sha256_hex([session_id, tool, arguments])


def key_for(
    session_id: str, tool: str, given: str | None, arguments: dict[str, JSONValue]
) -> tuple[str, str]:
    """(the hub key, `given` or `derived`)."""
    if given is not None:
        return given, GIVEN
    return derived_key(session_id, tool, arguments), DERIVED


def upload_arguments(
    room: str, stat: os.stat_result, name: str, caption: str, sha256: str
) -> dict[str, JSONValue]:
    """What an `upload_file` call is, for its derived key: the room, the file (device and
    inode of the opened descriptor, so no spelling of its path counts), the file name the
    hub is sent, the caption and the content hash."""
    return {
        "room": room,
        "file": [stat.st_dev, stat.st_ino],
        "name": name,
        "caption": caption,
        "sha256": sha256,
    }
