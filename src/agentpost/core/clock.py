"""Wall-clock helpers in one place, so tests and TTL rules agree on the time format."""

from __future__ import annotations

import time
from datetime import UTC, datetime


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return int(time.time() * 1000)


def rfc3339(ms: int) -> str:
    """RFC 3339 UTC with milliseconds, e.g. `2026-11-30T08:00:00.123Z`."""
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
