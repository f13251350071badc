"""The mail clock: the one place "now" is read, and the timestamp format.

`AGENTPOST_MAIL_NOW` (RFC 3339 or Unix seconds) pins the clock, so the 30 s
throttle, the 10 min republish and the 14-day expiry are tested without sleeping.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from agentpost.mail.errors import InvalidClock

NOW_ENV = "AGENTPOST_MAIL_NOW"


def now() -> datetime:
    """The current time in UTC, or the pinned time from `AGENTPOST_MAIL_NOW`."""
    pinned = os.environ.get(NOW_ENV)
    if not pinned:
        return datetime.now(UTC)
    try:
        return datetime.fromtimestamp(float(pinned), UTC)
    except ValueError:
        pass
    try:
        return parse_ts(pinned)
    except ValueError as exc:
        raise InvalidClock(f"{NOW_ENV}={pinned!r} is neither RFC 3339 nor Unix seconds") from exc


def format_ts(moment: datetime) -> str:
    """RFC 3339 UTC with milliseconds, e.g. `2026-11-30T08:39:18.123Z`."""
    text = moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
    return text[:-3] + "Z"


def parse_ts(text: str) -> datetime:
    """Parse an RFC 3339 timestamp; a value without an offset is refused."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError(f"timestamp without offset: {text!r}")
    return moment.astimezone(UTC)
