"""Posting: messages and media, keyed or not (docs/api.md). HTTP only; rules live in
`hub/idempotency.py` (keys) and `hub/posting.py` (events)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, Response

from agentpost.core.clock import now_ms
from agentpost.core.errors import AgentpostError, Code, RequestError
from agentpost.core.ids import new_id
from agentpost.core.jcs import canonical
from agentpost.hub import auth, idempotency, leases, mediatypes, posting, routing
from agentpost.hub.decode import MAX_METADATA_DEPTH, decode_json, read_body, within_depth
from agentpost.hub.errors import json_response
from agentpost.hub.idempotency import Answer, Created
from agentpost.hub.routes.rooms import visible_room
from agentpost.hub.routing import router
from agentpost.hub.schemas import CancelIn, MessageIn
from agentpost.hub.state import Hub, hub_of
from agentpost.hub.submit import submit
from agentpost.store import media
from agentpost.store.batch import AsData
from agentpost.store.engine import Db, Tx
from agentpost.store.models import MediaRow, Member

log = logging.getLogger("agentpost.hub")

MESSAGES_ROUTE = "POST /v1/rooms/{room}/messages"
MEDIA_ROUTE = "POST /v1/rooms/{room}/media"
CANCEL_ROUTE = "POST /v1/rooms/{room}/cancel"
# The event a Worker's post serves (its Turn's trigger): docs/delegation.md "Cause".
CAUSE_HEADER = "Agentpost-Cause"
_EVENT_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def trigger_header(raw: str | None) -> str | None:
    """The `Agentpost-Cause` header: absent, or an event id."""
    if raw is None:
        return None
    text = raw.strip()
    if _EVENT_ID.fullmatch(text) is None:
        raise RequestError(
            Code.INVALID_REQUEST, f"{CAUSE_HEADER} must be an event id", field=CAUSE_HEADER
        )
    return text


def normalize(body: MessageIn, worker: bool = False) -> dict[str, Any]:
    """The request as stored and compared: text trimmed, defaults filled in, metadata only
    the hub (or, unless `worker`, only a Worker) writes dropped (docs/architecture.md#write-path,
    docs/architecture.md#server-owned-metadata)."""
    text = body.text.strip()
    if not text and not body.attachments:
        raise RequestError(Code.INVALID_REQUEST, "text must not be blank", field="$.text")
    if body.reply_kind is not None and body.in_reply_to is None:
        raise RequestError(
            Code.INVALID_REQUEST, "reply_kind needs in_reply_to", field="$.reply_kind"
        )
    if body.metadata:
        if not within_depth(body.metadata, MAX_METADATA_DEPTH):
            raise RequestError(
                Code.INVALID_REQUEST,
                f"metadata nests deeper than {MAX_METADATA_DEPTH} levels",
                field="$.metadata",
            )
        canonical(body.metadata)  # refuse what a fingerprint could not represent, keyed or not
    return {
        "text": text,
        "metadata": routing.strip_server_owned(body.metadata, worker),
        "in_reply_to": body.in_reply_to,
        "reply_kind": body.reply_kind,
        "attachments": list(dict.fromkeys(body.attachments)),
    }


def answer_response(ans: Answer, keyed: bool) -> Response:
    headers = {idempotency.STATUS_HEADER: ans.idempotency_status} if keyed else None
    return json_response(ans.status, ans.body, headers)


async def _post(
    hub: Hub,
    route: str,
    member_id: str,
    key: str | None,
    fp: str | None,
    create: Callable[[Tx], Created],
    prepare: Callable[[], Awaitable[None]] | None = None,
    order: str = "",
    as_data: AsData | None = None,
) -> Response:
    """Run one post through the key rules (or straight, without a key); answer it."""
    ans = await submit(hub, route, member_id, key, fp, create, prepare, order, as_data)
    return answer_response(ans, key is not None)


async def post_message(request: Request) -> Response:
    return await message_post(
        hub_of(request),
        request.path_params["room"],
        request.headers.get("authorization", ""),
        request.headers.get(idempotency.HEADER),
        lambda cap: read_body(request, cap),
        request.headers.get(leases.FENCE_HEADER),
        request.headers.get(CAUSE_HEADER),
    )


async def message_post(
    hub: Hub,
    room_id: str,
    authorization: str,
    key_header: str | None,
    body_of: Callable[[int], Awaitable[bytes]],
    fence_header: str | None = None,
    cause_header: str | None = None,
) -> Response:
    """POST /v1/rooms/{room}/messages from its parts, for the Starlette route and the thin
    ASGI path alike (hub/routes/thin.py): auth, key, body (read only then), post.

    On a shared database the member may come from a hint (hub/auth.py `TokenCache`): the
    write checks it again, and any answer the write did not make now (a replay, a refusal)
    is given only after the token is read afresh, so a removed member is refused at once."""
    member, hinted = await auth.poster_of(authorization, hub)
    try:
        ans = await _message_answer(
            hub, room_id, member, hinted, key_header, body_of, fence_header, cause_header
        )
    except AgentpostError:
        if hinted is not None:
            await auth.member_by_hash(hinted, hub)  # a removal or a bad token says so first
        raise
    if hinted is not None and (ans.idempotency_status != idempotency.CREATED or ans.status >= 300):
        await auth.member_by_hash(hinted, hub)
    return answer_response(ans, key_header is not None)


async def _message_answer(
    hub: Hub,
    room_id: str,
    member: Member,
    hinted: str | None,
    key_header: str | None,
    body_of: Callable[[int], Awaitable[bytes]],
    fence_header: str | None,
    cause_header: str | None = None,
) -> Answer:
    key = idempotency.check_key(key_header)
    fence = leases.fence_header(fence_header)
    # The Turn a Worker's post serves (docs/delegation.md "Cause"): taken only from a post
    # fenced by the Worker's lease, and only if that event woke the agent.
    trigger = trigger_header(cause_header) if fence is not None else None
    body = decode_json(await body_of(hub.config.max_json_bytes), MessageIn)
    # A fenced post is a Worker's: its notice marks are kept (checked in the transaction).
    normalized = normalize(body, worker=fence is not None and member.kind == "agent")
    fp = idempotency.fingerprint(MESSAGES_ROUTE, room_id, normalized) if key else None

    asked: dict[str, str] = {}
    settings = hub.router_settings

    async def ask_router() -> None:
        # Only a new post of a human with no live mention in an `llm` room asks the model,
        # before the write transaction (docs/architecture.md#write-path); a replay never does.
        assert settings is not None
        candidates = await hub.engine.read(
            lambda db: router.llm_candidates(db, room_id, member, normalized["text"])
        )
        if candidates is not None:
            asked["choice"] = await router.ask_llm(
                settings, hub.http.client(), candidates, normalized["text"]
            )

    # Without a model to ask (an llm room then stops, see routing.router), or for an agent,
    # there is nothing to prepare.
    prepare = ask_router if settings is not None and member.kind == "human" else None
    if prepare is not None and hinted is not None:
        member = await auth.member_by_hash(hinted, hub)  # known before a model is asked
        hinted = None

    def create(tx: Tx) -> Created:
        return posting.create_message(
            tx,
            room_id,
            member,
            normalized,
            asked.get("choice"),
            fence=fence,
            token=hinted,
            trigger=trigger,
        )

    # A plain keyed post may be written with the batch's other plain posts (issue 14); the
    # writer runs `create` instead for anything `write_plain` declines. A Worker's fenced
    # post is checked against its lease in `create`'s transaction.
    as_data = None
    if (
        key is not None
        and fp is not None
        and fence is None
        and member.kind != "agent"  # an agent's event carries its cause (routing/cause.py)
        and posting.is_plain(normalized)
    ):
        plain = posting.PlainPost(
            key, fp, room_id, member, normalized["text"], normalized["metadata"], hinted
        )
        as_data = AsData(posting.write_plain, plain)
    return await submit(hub, MESSAGES_ROUTE, member.id, key, fp, create, prepare, room_id, as_data)


async def cancel(request: Request) -> Response:
    """Cancel the running Turn in the room: posts `/stop` (naming `agent` if given) as the
    caller, which the routing rules send to the room's live agents
    (docs/connect.md "Cancelling, permissions, time limits"). Unkeyed: a
    second stop is harmless. Participants only, like any post."""
    hub = hub_of(request)
    member = await auth.member(request, hub)
    room_id = request.path_params["room"]
    raw = await read_body(request, hub.config.max_json_bytes)
    body = decode_json(raw, CancelIn) if raw.strip() else CancelIn()
    text = routing.STOP if body.agent is None else f"{routing.STOP} @{body.agent}"
    normalized: dict[str, Any] = {
        "text": text,
        "metadata": {},
        "in_reply_to": None,
        "reply_kind": None,
        "attachments": [],
    }

    def create(tx: Tx) -> Created:
        return posting.create_message(tx, room_id, member, normalized)

    return await _post(hub, CANCEL_ROUTE, member.id, None, None, create, None, room_id)


async def post_media(request: Request) -> Response:
    return await media_post(
        hub_of(request),
        request.path_params["room"],
        request.headers.get("authorization", ""),
        request.headers.get(idempotency.HEADER),
        request.headers.get("content-type", ""),
        request.headers.get("content-length"),
        request.stream(),
        request.headers.get(leases.FENCE_HEADER),
        request.headers.get(CAUSE_HEADER),
    )


async def media_post(
    hub: Hub,
    room_id: str,
    authorization: str,
    key_header: str | None,
    content_type: str,
    declared: str | None,
    stream: AsyncIterator[bytes],
    fence_header: str | None = None,
    cause_header: str | None = None,
) -> Response:
    """POST /v1/rooms/{room}/media from its parts, for the Starlette route and the thin
    ASGI path alike (hub/routes/thin.py)."""
    member = await auth.member_of(authorization, hub)
    key = idempotency.check_key(key_header)
    fence = leases.fence_header(fence_header)
    trigger = trigger_header(cause_header) if fence is not None else None
    # Refuse early what would be refused anyway, before streaming a large body to disk.
    await hub.engine.read(lambda db: visible_room(db, room_id, member))
    cap = hub.config.max_upload_bytes
    length = int(declared) if declared is not None and declared.isdigit() else None
    if length is not None and length > cap + 65536:
        raise RequestError(Code.PAYLOAD_TOO_LARGE, f"file is over {cap} bytes")
    upload = await hub.blobs.receive(content_type, stream, cap, length)
    normalized = {
        "name": upload.name,
        "mime_type": upload.mime_type,
        "sha256": upload.sha256,
        "text": upload.caption,
    }
    fp = idempotency.fingerprint(MEDIA_ROUTE, room_id, normalized) if key else None
    row = MediaRow(
        id=new_id("md"),
        room_id=room_id,
        sha256=upload.sha256,
        name=upload.name,
        mime_type=upload.mime_type,
        size=upload.size,
        uploader=member.name,
        created_at=now_ms(),
    )

    def create(tx: Tx) -> Created:
        return posting.create_media_event(
            tx, room_id, member, row, upload.caption, fence, trigger=trigger
        )

    return await _post(hub, MEDIA_ROUTE, member.id, key, fp, create, None, room_id)


async def get_media(request: Request) -> Response:
    hub = hub_of(request)
    member = await auth.member(request, hub)
    media_id = request.path_params["media"]

    def read(db: Db) -> MediaRow:
        row = media.by_id(db, media_id)
        if row is None:
            raise RequestError(Code.MEDIA_NOT_FOUND, f"no media {media_id!r}")
        try:
            visible_room(db, row.room_id, member)
        except AgentpostError:
            # Not a participant: the media does not exist for this member.
            raise RequestError(Code.MEDIA_NOT_FOUND, f"no media {media_id!r}") from None
        return servable(row)

    return await download(hub, await hub.engine.read(read))


def servable(row: MediaRow) -> MediaRow:
    """The file, if its bytes may still be served: 410 once redacted or expired."""
    if row.redacted:
        raise RequestError(Code.MEDIA_REDACTED, f"media {row.id!r} was redacted; its file is gone")
    if row.expired_at is not None:
        raise RequestError(
            Code.MEDIA_EXPIRED,
            f"media {row.id!r} expired under its room's retention; its file is gone",
        )
    return row


async def download(hub: Hub, row: MediaRow) -> FileResponse:
    """The file's bytes: always an attachment, never sniffed, never run (hub/mediatypes.py).

    Bytes missing from the store (lost outside the hub: a blob freed only after its grace,
    hub/retention.py) are a clean `media_missing`, logged, not a bare 500 from the sender."""
    path = hub.blobs.path_of(row.sha256)
    try:
        stat = await asyncio.to_thread(path.stat)
    except FileNotFoundError:
        log.error("media %s: its bytes %s are missing from the blob store", row.id, row.sha256)
        raise RequestError(
            Code.MEDIA_MISSING,
            f"the bytes of media {row.id!r} are missing from the hub's store; "
            "the operator's `agentpost db verify` lists such files",
        ) from None
    return FileResponse(
        path,
        stat_result=stat,
        media_type=mediatypes.for_download(row.mime_type),
        filename=row.name,
        headers={"X-Content-SHA256": row.sha256, **mediatypes.DOWNLOAD_HEADERS},
        content_disposition_type="attachment",
    )
