"""Who gets a Turn, and in which Session (docs/connect.md).

A wake-up in room R from sender S maps to a Session key: (R, owner) for the agent's
owner; (R, S) for a collaborator — a name listed with `--collaborator` or in
`<workspace>/collaborators` (re-read on SIGHUP), or another agent of the same owner.
Anyone else gets no Turn (and one short notice per room). One ACP session per key,
created lazily and kept while the agent process lives.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("agentpost.connect.sessions")

OWNER_CACHE_SECONDS = 60.0


@dataclass(frozen=True)
class SessionKey:
    room: str
    who: str
    owner_tier: bool

    def label(self) -> str:
        return f"{self.room}/{self.who}"

    def folder(self) -> str:
        """The name of this Session's attachment folder: a digest, so that no room id or
        member name ever spells a path."""
        digest = hashlib.sha256(json.dumps([self.room, self.who]).encode()).hexdigest()
        return f"session-{digest[:32]}"


OwnerLookup = Callable[[str], Awaitable[str | None]]


class Admission:
    """The owner, the collaborator list, and the owners of other agents (cached)."""

    def __init__(
        self,
        me: str,
        owner: str | None,
        flags: list[str],
        file: Path | None,
        owner_of: OwnerLookup,
    ) -> None:
        self.me = me
        self.owner = owner
        self._flags = list(flags)
        self._file = file
        self._owner_of = owner_of
        self._owners: dict[str, tuple[float, str | None]] = {}
        self.collaborators = self.reload()

    def reload(self) -> frozenset[str]:
        """Re-read the collaborator list (flags + the file, one name per line, `#` comments)."""
        names = set(self._flags)
        if self._file is not None:
            try:
                for line in self._file.read_text("utf-8").splitlines():
                    name = line.split("#", 1)[0].strip()
                    if name:
                        names.add(name)
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.error("cannot read %s (%s); keeping the flags only", self._file, exc)
        self.collaborators = frozenset(names)
        log.info("collaborators: %s", ", ".join(sorted(names)) or "(none)")
        return self.collaborators

    async def key_for(self, room: str, sender: str, sender_kind: str) -> SessionKey | None:
        if sender == self.me:
            return None
        if self.owner is not None and sender == self.owner:
            return SessionKey(room, sender, True)
        if sender in self.collaborators:
            return SessionKey(room, sender, False)
        if sender_kind == "agent" and self.owner is not None:
            if await self._cached_owner(sender) == self.owner:
                return SessionKey(room, sender, False)
        return None

    def learned_owner(self, name: str, owner: str | None) -> None:
        """What the hub just said owns `name` (None: no one, or no longer active): kept as
        the cached answer, so a check right after judges by it and not an older one."""
        self._owners[name] = (time.monotonic(), owner)

    async def _cached_owner(self, name: str) -> str | None:
        now = time.monotonic()
        hit = self._owners.get(name)
        if hit is not None and now - hit[0] < OWNER_CACHE_SECONDS:
            return hit[1]
        owner = await self._owner_of(name)
        self._owners[name] = (now, owner)
        return owner
