"""Who gets a Turn, and in which Session (docs/connect.md).

A wake-up in room R from sender S maps to a Session key: (R, owner) for the agent's
owner; (R, S) for a collaborator — a name listed with `--collaborator` or in
`<workspace>/collaborators` (re-read on SIGHUP), or another agent of the same owner.
Anyone else gets no Turn (and one short notice per room). One ACP session per key,
created lazily and kept while the agent process lives.

The owner is recognised by member id (the EVENT's `sender_id` against the hub's
`owner_id`), never by name: a person who takes a name freed by a hard removal is not the
owner (docs/architecture.md#identity). A person who is not the owner makes the Worker ask the hub
again who is (at most every OWNER_REFRESH_SECONDS), so an owner an admin names later is seen.
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
OWNER_REFRESH_SECONDS = 5.0


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


@dataclass(frozen=True)
class Owned:
    """What the hub says of a member: its id, and its owner's member id (None: no owner, or
    the member is not active)."""

    member_id: str | None
    owner_id: str | None


# A member's name → what the hub says of it now.
OwnerLookup = Callable[[str], Awaitable[Owned]]
# This agent's owner as the hub says now: (name, member id), (None, None) for no owner; the
# owner as it was when the hub cannot be asked.
OwnerRefresh = Callable[[], Awaitable[tuple[str | None, str | None]]]


class Admission:
    """The owner, the collaborator list, and the owners of other agents (cached)."""

    def __init__(
        self,
        me: str,
        owner: str | None,
        flags: list[str],
        file: Path | None,
        owner_of: OwnerLookup,
        *,
        owner_id: str | None = None,
        refresh: OwnerRefresh | None = None,
    ) -> None:
        self.me = me
        self.owner = owner  # the name, for people to read
        self.owner_id = owner_id  # what a sender is compared with
        self._flags = list(flags)
        self._file = file
        self._owner_of = owner_of
        self._refresh = refresh
        self._refreshed = -OWNER_REFRESH_SECONDS  # the first person not the owner asks
        self._owners: dict[str, tuple[float, Owned]] = {}
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

    async def key_for(
        self, room: str, sender: str, sender_kind: str, sender_id: str | None = None
    ) -> SessionKey | None:
        """The Session key of a wake-up from `sender` (its member id `sender_id`, as the
        EVENT says; None where it is not known: never the owner), or None: no Turn."""
        if sender == self.me:
            return None
        if await self._is_owner(sender_kind, sender_id):
            return SessionKey(room, sender, True)
        if sender in self.collaborators:
            return SessionKey(room, sender, False)
        if sender_kind == "agent" and self.owner_id is not None:
            found = await self._cached_owner(sender)
            # The agent of that name now, owned by ours, and the very one that sent it.
            if found.owner_id == self.owner_id and sender_id in (None, found.member_id):
                return SessionKey(room, sender, False)
        return None

    async def _is_owner(self, sender_kind: str, sender_id: str | None) -> bool:
        if sender_id is None:
            return False
        if self.owner_id is not None and sender_id == self.owner_id:
            return True
        now = time.monotonic()
        if sender_kind != "human" or self._refresh is None:
            return False
        if now - self._refreshed < OWNER_REFRESH_SECONDS:
            return False
        self._refreshed = now
        owner, owner_id = await self._refresh()
        if owner_id != self.owner_id:
            log.info("%s is owned by %s now (was %s)", self.me, owner, self.owner)
            self.owner, self.owner_id = owner, owner_id
        return owner_id is not None and sender_id == owner_id

    def learned_owner(self, name: str, owned: Owned) -> None:
        """What the hub just said of `name` (its id, and its owner's id: None for no one, or
        no longer active): kept as the cached answer, so a check right after judges by it
        and not an older one."""
        self._owners[name] = (time.monotonic(), owned)

    async def _cached_owner(self, name: str) -> Owned:
        now = time.monotonic()
        hit = self._owners.get(name)
        if hit is not None and now - hit[0] < OWNER_CACHE_SECONDS:
            return hit[1]
        owned = await self._owner_of(name)
        self._owners[name] = (now, owned)
        return owned
