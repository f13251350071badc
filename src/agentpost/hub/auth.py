"""Who is asking: member tokens (hashed lookups, every request) and the admin token.

No token cache: a removed member is refused on its very next request (DESIGN.md §2).
"""

from __future__ import annotations

import hmac

from starlette.requests import Request

from agentpost.core.errors import AuthError, Code
from agentpost.core.ids import token_hash
from agentpost.store import members
from agentpost.store.engine import Engine
from agentpost.store.models import Member


def bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AuthError(Code.UNAUTHORIZED, "missing or malformed Authorization: Bearer token")
    return token.strip()


async def member(request: Request, engine: Engine) -> Member:
    """The active member behind the request's token."""
    hashed = token_hash(bearer(request))
    found = await engine.read(lambda db: members.member_by_token(db, hashed))
    if found is None:
        raise AuthError(Code.UNAUTHORIZED, "unknown token")
    if found.status != "active":
        code = Code.AGENT_REMOVED if found.kind == "agent" else Code.MEMBER_REMOVED
        raise AuthError(code, f"member {found.name!r} was removed from the workspace")
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
