"""Crash points for the kill -9 tests (bench/HISTORY.md): `AGENTPOST_CONNECT_CRASH_POINT=name`
makes the Worker SIGKILL itself when it reaches the point of that name."""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger("agentpost.connect.crash")

CRASH_ENV = "AGENTPOST_CONNECT_CRASH_POINT"


def crash_point(name: str) -> None:
    """Tests: `AGENTPOST_CONNECT_CRASH_POINT=name` kills this Worker with SIGKILL there."""
    if os.environ.get(CRASH_ENV) == name:
        log.critical("crash point %s reached: SIGKILL", name)
        os.kill(os.getpid(), signal.SIGKILL)


FAIL_ENV = "AGENTPOST_CONNECT_FAIL_POINT"


def fail_point(name: str) -> None:
    """Tests: `AGENTPOST_CONNECT_FAIL_POINT=name` raises an unexpected error there, as a bug
    of the Worker would (the Turn must still end in a visible reply,
    docs/architecture.md#no-turn-ends-in-silence)."""
    if os.environ.get(FAIL_ENV) == name:
        raise RuntimeError(f"fail point {name} reached")
