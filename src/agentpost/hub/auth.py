"""Who is asking: member tokens (hashed lookups, every request) and the admin token.

No token cache: a removed member is refused on its very next request (docs/api.md).
Every member let through is stamped as seen (presence, §12): in memory, never a write.
"""

from __future__ import annotations

import hmac
from typing import Protocol

from starlette.requests import Request

from agentpost.core.errors import AuthError, Code
from agentpost.core.ids import token_hash
from agentpost.hub.presence import Presence
from agentpost.store import members
from agentpost.store.engine import Db, Engine
from agentpost.store.models import Member


class HasAuth(Protocol):
    engine: Engine
    tokens: TokenCache
    presence: Presence


def bearer(request: Request) -> str:
    return bearer_of(request.headers.get("authorization", ""))


def bearer_of(header: str) -> str:
    """The token of an `Authorization: Bearer …` header's value."""
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError(Code.UNAUTHORIZED, "missing or malformed Authorization: Bearer token")
    return token.strip()


class TokenCache:
    """Token hash → member, kept only where this process is the store's one writer (SQLite).

    Every removal goes through this process and calls `forget` right after its commit, so a
    removed member is still refused on its next request. With a shared database (PostgreSQL)
    another process may remove a member at any moment: there is no cache, every request
    asks the database. `inbox_cursor` of a cached member is stale: read it from the store.
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._by_hash: dict[str, Member] = {}

    def get(self, hashed: str) -> Member | None:
        return self._by_hash.get(hashed) if self.enabled else None

    def put(self, hashed: str, found: Member) -> None:
        if self.enabled and found.status == "active":
            if len(self._by_hash) >= 100_000:
                self._by_hash.clear()  # bounded; refilled from the store on demand
            self._by_hash[hashed] = found

    def forget(self, member_id: str) -> None:
        self._by_hash = {h: m for h, m in self._by_hash.items() if m.id != member_id}


async def member(request: Request, hub: HasAuth) -> Member:
    """The active member behind the request's token."""
    return await member_of(request.headers.get("authorization", ""), hub)


async def member_of(authorization: str, hub: HasAuth) -> Member:
    """The active member behind an `Authorization` header's value."""
    hashed = token_hash(bearer_of(authorization))
    found = hub.tokens.get(hashed)
    if found is not None:
        hub.presence.seen(found.id)
        return found
    found = await hub.engine.read(lambda db: members.member_by_token(db, hashed))
    if found is not None:
        hub.tokens.put(hashed, found)
    if found is None:
        gone = await hub.engine.read(lambda db: members.tombstone(db, hashed))
        if gone is not None:
            raise removed(*gone)
        raise AuthError(Code.UNAUTHORIZED, "unknown token")
    if found.status != "active":
        raise removed(found.name, found.kind)
    hub.presence.seen(found.id)
    return found


def require_admin(request: Request, admin_hash: str) -> None:
    if not hmac.compare_digest(token_hash(bearer(request)), admin_hash):
        raise AuthError(Code.UNAUTHORIZED, "this route needs the admin token")


def is_admin(request: Request, admin_hash: str) -> bool:
    try:
        require_admin(request, admin_hash)
    except AuthError:
        return False
    return True


def still_active(db: Db, who: Member) -> None:
    """Refuse a member removed since it authenticated (long-lived streams re-check this)."""
    if members.status(db, who.id) != "active":
        raise removed(who.name, who.kind)


def removed(name: str, kind: str) -> AuthError:
    """The refusal of a member removed from the workspace (soft or hard), docs/delegation.md."""
    code = Code.AGENT_REMOVED if kind == "agent" else Code.MEMBER_REMOVED
    return AuthError(code, f"member {name!r} was removed from the workspace")
