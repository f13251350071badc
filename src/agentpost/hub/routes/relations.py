"""Edits, reactions and redactions over HTTP (docs/api.md "Relations"). HTTP only: the
rules live in hub/relations.py, the key rules in hub/idempotency.py."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from agentpost.hub import auth, idempotency, leases, relations
from agentpost.hub.decode import decode_json, read_body
from agentpost.hub.routes.messages import answer_response
from agentpost.hub.schemas import EditIn, ReactionIn, RedactionIn
from agentpost.hub.state import hub_of


async def post_edit(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    key = request.headers.get(idempotency.HEADER)
    fence = leases.fence_header(request.headers.get(leases.FENCE_HEADER))
    body = decode_json(await read_body(request, hub.config.max_json_bytes), EditIn)
    posted = await relations.edit(hub, member, *_where(request), body.text, key, fence=fence)
    return answer_response(posted.answer, key is not None)


async def post_reaction(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    key = request.headers.get(idempotency.HEADER)
    fence = leases.fence_header(request.headers.get(leases.FENCE_HEADER))
    body = decode_json(await read_body(request, hub.config.max_json_bytes), ReactionIn)
    posted = await relations.react(
        hub, member, *_where(request), body.emoji, key, remove=body.remove, fence=fence
    )
    return answer_response(posted.answer, key is not None)


async def post_redaction(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    key = request.headers.get(idempotency.HEADER)
    fence = leases.fence_header(request.headers.get(leases.FENCE_HEADER))
    raw = await read_body(request, hub.config.max_json_bytes)
    body = decode_json(raw, RedactionIn) if raw.strip() else RedactionIn()
    posted = await relations.redact(hub, member, *_where(request), body.reason, key, fence=fence)
    return answer_response(posted.answer, key is not None)


def _where(request: Request) -> tuple[str, str]:
    return request.path_params["room"], request.path_params["event"]
