"""In-process wake-ups for streams and long polls: "something new for this room/member".

A waiter takes the current `asyncio.Event` for a key, re-reads the store, and only then
waits; a commit's after-commit callback sets and retires the event. Data always comes
from the store, so a missed wake-up costs latency, never an event.
"""

from __future__ import annotations

import asyncio

ALL = "*"


class Notifier:
    def __init__(self) -> None:
        self._events: dict[str, asyncio.Event] = {}
        self.closed = False

    def event(self, key: str) -> asyncio.Event:
        if self.closed:  # shutting down: nobody waits any more
            ev = asyncio.Event()
            ev.set()
            return ev
        found = self._events.get(key)
        if found is None:
            found = self._events[key] = asyncio.Event()
        return found

    def notify(self, key: str) -> None:
        """Wake the waiters on `key`; `*` wakes every waiter (after a lost connection to
        the other processes' wake-ups, everyone re-reads)."""
        if key == ALL:
            events, self._events = self._events, {}
            for ev in events.values():
                ev.set()
            return
        woken = self._events.pop(key, None)
        if woken is not None:
            woken.set()

    def close(self) -> None:
        """The hub is shutting down: wake every waiter for good. Streams and long polls
        see `closed` and end, so a shutdown is not held up by readers (docs/api.md "Streams and
        long polls")."""
        self.closed = True
        self.notify(ALL)


async def wait(ev: asyncio.Event, timeout: float) -> bool:
    """True when woken, False on timeout."""
    try:
        await asyncio.wait_for(ev.wait(), timeout)
    except TimeoutError:
        return False
    return True


def room_key(room_id: str) -> str:
    return "room:" + room_id


def inbox_key(member_id: str) -> str:
    return "inbox:" + member_id
