"""The mail clock reads AGENTPOST_MAIL_NOW in one place, so time-based rules test without sleeping."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentpost.mail import clock
from agentpost.mail.errors import InvalidClock


def test_pinned_clock_accepts_unix_seconds_and_rfc3339(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTPOST_MAIL_NOW", "0")
    assert clock.now() == datetime(1970, 1, 1, tzinfo=UTC)
    monkeypatch.setenv("AGENTPOST_MAIL_NOW", "2026-11-30T10:00:00+02:00")
    assert clock.now() == datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def test_a_bad_pinned_clock_is_an_error_with_its_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTPOST_MAIL_NOW", "tomorrow")
    with pytest.raises(InvalidClock) as err:
        clock.now()
    assert err.value.code == "invalid_clock"


def test_timestamps_are_utc_with_milliseconds_and_round_trip() -> None:
    moment = datetime(2026, 11, 30, 8, 39, 18, 123456, tzinfo=UTC)
    text = clock.format_ts(moment)
    assert text == "2026-11-30T08:39:18.123Z"
    assert clock.parse_ts(text) == moment.replace(microsecond=123000)


def test_a_timestamp_without_offset_is_refused() -> None:
    with pytest.raises(ValueError):
        clock.parse_ts("2026-11-30T08:39:18")
