"""Open streams: how many each member holds in this process, and the cap on them.

A stream costs the hub a connection, a task and up to one page of events in memory for as
long as its reader keeps it open, so one member may hold at most `per_member` at once; one
more is refused with 429 `too_many_streams` until one of them closes (docs/api.md).
"""

from __future__ import annotations

from collections.abc import Callable

from agentpost.core.errors import AgentpostError, Code


class StreamSlots:
    def __init__(self, per_member: int) -> None:
        self.per_member = per_member
        self._open: dict[str, int] = {}

    def take(self, member_id: str) -> Callable[[], None]:
        """Take one of the member's slots; returns the function that gives it back (call it
        exactly once, when the stream ends)."""
        held = self._open.get(member_id, 0)
        if held >= self.per_member:
            raise AgentpostError(
                Code.TOO_MANY_STREAMS,
                f"this member already has {held} open streams on this hub process (the most"
                " it may hold); close one before opening another",
                limit=self.per_member,
            )
        self._open[member_id] = held + 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            left = self._open[member_id] - 1
            if left:
                self._open[member_id] = left
            else:
                del self._open[member_id]

        return release

    def holders(self) -> list[str]:
        """The members holding at least one open stream."""
        return list(self._open)

    def held(self, member_id: str) -> int:
        return self._open.get(member_id, 0)
