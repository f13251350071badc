"""Who is asking: member tokens (hashed lookups) and the admin token.

A removed member is refused on its very next request (docs/api.md), on every process: see
`TokenCache` for how a cached answer keeps that. Every member let through is stamped as
seen (presence, docs/presence.md): in memory, never a write.
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


FORGET = "tokens:"
"""A wake-up key (`Tx.notify`) a removal or a token reissue commits with: every process
drops the member from its `TokenCache` (on PostgreSQL through NOTIFY, store/postgres.py)."""


class TokenCache:
    """Token hash → member, so most requests do not read the token's row.

    One writer (SQLite, `shared` False): every removal and reissue runs in this process and
    `forget`s right after its commit, so an entry is the truth for every route.

    A shared database (PostgreSQL): another process may remove a member or reissue its token
    at any moment, so an entry is only a hint. Only the message post route takes it
    (`poster_of`), and its write transaction checks it again under the room's lock: the
    member still active (`posting.sendable_room`, `write_plain`) and the token still its own
    (`members.held_tokens`). An answer the transaction did not make (a replay, a refusal) is
    given only after a fresh read (`member_by_hash`). Every other route reads the store. A
    removal's or reissue's commit notifies every process (`FORGET`), which drops the entry;
    a refused hint is dropped too. `inbox_cursor` of a cached member is stale: read it from
    the store.
    """

    def __init__(self, shared: bool) -> None:
        self.shared = shared
        self._by_hash: dict[str, Member] = {}

    def get(self, hashed: str) -> Member | None:
        """The member, where an entry is the truth (one writer)."""
        return None if self.shared else self._by_hash.get(hashed)

    def hint(self, hashed: str) -> Member | None:
        return self._by_hash.get(hashed)

    def put(self, hashed: str, found: Member) -> None:
        if found.status == "active":
            if len(self._by_hash) >= 100_000:
                self._by_hash.clear()  # bounded; refilled from the store on demand
            self._by_hash[hashed] = found

    def drop(self, hashed: str) -> None:
        self._by_hash.pop(hashed, None)

    def forget(self, member_id: str) -> None:
        self._by_hash = {h: m for h, m in self._by_hash.items() if m.id != member_id}

    def clear(self) -> None:
        self._by_hash = {}


async def member(request: Request, hub: HasAuth) -> Member:
    """The active member behind the request's token."""
    return await member_of(request.headers.get("authorization", ""), hub)


async def member_of(authorization: str, hub: HasAuth) -> Member:
    """The active member behind an `Authorization` header's value."""
    return await member_by_hash(token_hash(bearer_of(authorization)), hub)


async def member_by_hash(hashed: str, hub: HasAuth) -> Member:
    """The active member whose token hashes to `hashed` (from the cache where it is the
    truth, else from the store); a refusal drops the hash from the cache."""
    found = hub.tokens.get(hashed)
    if found is not None:
        hub.presence.seen(found.id)
        return found
    found = await hub.engine.read(lambda db: members.member_by_token(db, hashed))
    if found is None or found.status != "active":
        hub.tokens.drop(hashed)
    if found is None:
        gone = await hub.engine.read(lambda db: members.tombstone(db, hashed))
        if gone is not None:
            raise removed(*gone)
        raise AuthError(Code.UNAUTHORIZED, "unknown token")
    if found.status != "active":
        raise removed(found.name, found.kind)
    hub.tokens.put(hashed, found)
    hub.presence.seen(found.id)
    return found


async def poster_of(authorization: str, hub: HasAuth) -> tuple[Member, str | None]:
    """The member behind a message post's token, and the token's hash when the member came
    from a hint (`TokenCache`) that the post's write transaction must check again
    (`posting.sendable_room(token=…)`, `write_plain`); None when it is known."""
    hashed = token_hash(bearer_of(authorization))
    hinted = hub.tokens.hint(hashed) if hub.tokens.shared else None
    if hinted is not None:
        hub.presence.seen(hinted.id)
        return hinted, hashed
    return await member_by_hash(hashed, hub), None


def require_admin(request: Request, admin_hash: str) -> None:
    if not hmac.compare_digest(token_hash(bearer(request)), admin_hash):
        if request.headers.get("authorization"):  # a token, but not this hub's admin token
            raise AuthError(
                Code.UNAUTHORIZED,
                "this route needs the admin token, and the token sent is not this hub's "
                "admin token (the hub's is in its data dir's admin.token)",
            )
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
