"""Stream tickets: how a browser opens one room's SSE stream without a token in its URL.

A browser's EventSource cannot send `Authorization`, and a member token in a URL would
outlive the page in logs and history. A ticket names one member, one room and an expiry a
minute away, and is signed with the stored hash of the token that asked for it; it opens
only `GET /v1/rooms/{room}/stream` of that room (docs/web.md). Revoking the token, removing
the member or letting the minute pass ends it; no ticket is stored anywhere. A reader of the
database could forge one, but such a reader sees every event already.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from agentpost.core.clock import now_ms
from agentpost.core.errors import AuthError, Code
from agentpost.hub import auth
from agentpost.store import members
from agentpost.store.engine import Db
from agentpost.store.models import Member

PREFIX = "st1"
QUERY_PARAM = "ticket"


def _mac(key_hash: str, member_id: str, room_id: str, expires_ms: int) -> str:
    message = f"agentpost stream ticket\n{member_id}\n{room_id}\n{expires_ms}".encode()
    digest = hmac.new(key_hash.encode(), message, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def issue(who: Member, token_hash: str, room_id: str, ttl_seconds: float) -> tuple[str, int]:
    """(ticket, expires_ms) for `who` to open the stream of `room_id`."""
    expires_ms = now_ms() + int(ttl_seconds * 1000)
    mac = _mac(token_hash, who.id, room_id, expires_ms)
    return f"{PREFIX}.{who.id}.{room_id}.{expires_ms}.{mac}", expires_ms


def _refused(why: str) -> AuthError:
    return AuthError(Code.UNAUTHORIZED, f"stream ticket refused: {why}")


def redeem(db: Db, ticket: str, room_id: str) -> Member:
    """The active member a ticket for the stream of `room_id` speaks for; 401 when it is
    malformed, for another room, expired or no longer signed by a live token; 403 when its
    member was removed."""
    parts = ticket.split(".")
    if not ticket.isascii() or len(parts) != 5 or parts[0] != PREFIX or not parts[3].isdigit():
        raise _refused("malformed")
    _, member_id, for_room, expires_raw, mac = parts
    if for_room != room_id:
        raise _refused("it is for another room's stream")
    expires_ms = int(expires_raw)
    if now_ms() > expires_ms:
        raise _refused("expired; ask for a new one")
    found = members.member_by_id(db, member_id)
    signed = found is not None and any(
        hmac.compare_digest(_mac(h, member_id, room_id, expires_ms), mac)
        for h in members.token_hashes(db, member_id)
    )
    if found is None or not signed:
        raise _refused("not signed by a live token of its member")
    if found.status != "active":
        raise auth.removed(found.name, found.kind)
    return found
