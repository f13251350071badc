"""Every number the mail rules depend on, in one place (docs/mail.md).

Tests and operators may tighten a few of them through environment variables;
those are read here and nowhere else.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

# An unacknowledged message is dropped by its sender and refused by recipients after this.
MESSAGE_TTL = timedelta(days=14)
# How far ahead of this machine's clock an envelope's `sent_at` may be: clocks differ,
# but not by days. Past it the envelope is refused as `bad_timestamp`.
MAX_CLOCK_SKEW = timedelta(days=1)
# While anything is unacknowledged, the stop hook republishes at least this often.
REPUBLISH_EVERY = timedelta(minutes=10)
# Hooks fetch and import at most this often (session-start and prompt).
HOOK_SYNC_EVERY = timedelta(seconds=30)
# A ref message larger than this is refused unread: a peer cannot make us parse megabytes.
MAX_REF_BYTES = 4 * 1024 * 1024
# One body; keeps a full outbox (many bodies) under MAX_REF_BYTES for a long while.
MAX_BODY_BYTES = 64 * 1024
# How long an explicit `mail sync` waits for another one to finish.
LOCK_WAIT_SECONDS = 30.0
# A log longer than this many lines past what it still needs is compacted by sync.
COMPACT_SLACK_LINES = 2000


def inbox_capacity() -> int:
    """Unread messages one session's inbox holds before it leaves new ones unacked."""
    return int(_positive("AGENTPOST_MAIL_INBOX_CAPACITY", 200))


def git_timeout_seconds() -> float:
    """A bound on every git subprocess, so an unreachable remote cannot hang a hook."""
    return _positive("AGENTPOST_MAIL_GIT_TIMEOUT", 30)


def _positive(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1
    if value <= 0:
        # A typo must not disable a safety bound; say so and keep the default.
        print(f"agentpost mail: ignoring {name}={raw!r}; using {default:g}", file=sys.stderr)
        return default
    return value
