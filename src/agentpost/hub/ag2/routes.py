"""The AG2 relay wire's routes, mounted under `/ag2` (docs/architecture.md#ag2-relay-profile,
docs/ag2.md). HTTP only: the rules are the hub's (keys in `hub/idempotency.py`, posting and
receipts in `hub/posting.py` and `hub/routing/`), leases in `tasks.py`, answers in `answers.py`, the
wire's shapes and ids in `wire.py`. Every refusal is the hub's error body, with a stable
`code`; a lease that is gone answers 404 whose message says "not leased", which is how the
relay client tells it from a missing route."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import logging
import mimetypes
import posixpath

import msgspec
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from agentpost.core.clock import now_ms
from agentpost.core.errors import AgentpostError, AuthError, Code, RequestError
from agentpost.core.ids import new_id
from agentpost.hub import auth, idempotency, leases, posting, relations
from agentpost.hub.ag2 import answers, tasks, wire
from agentpost.hub.decode import decode_json, read_body
from agentpost.hub.errors import json_response
from agentpost.hub.idempotency import Answer, Created
from agentpost.hub.mediatypes import safe_name
from agentpost.hub.notify import inbox_key, wait
from agentpost.hub.routes.events import float_param
from agentpost.hub.routes.messages import get_media
from agentpost.hub.routes.rooms import visible_room
from agentpost.hub.schemas import Event
from agentpost.hub.state import Hub, hub_of
from agentpost.store import ag2, rooms
from agentpost.store.engine import Db, Tx
from agentpost.store.models import MediaRow, Member

PREFIX = "/ag2"
INTAKE_REACTION = "🫡"
RESULTS_ROUTE = "POST /ag2/v1/results"
MAX_WAIT = 30.0

_encode = msgspec.json.encode
log = logging.getLogger("agentpost.hub.ag2")


def _ok(status: int, value: object) -> Response:
    return json_response(status, _encode(value))


async def _agent(request: Request, hub: Hub) -> Member:
    member = await auth.member(request, hub)
    if member.kind != "agent":
        raise AuthError(Code.FORBIDDEN, "the AG2 relay profile serves agent members only")
    return member


def _base(request: Request) -> str:
    """The profile's base URL, from the hub's public URL (or its bound address), never the
    request's Host: media links under it carry the client's bearer (the relay client sends
    it only under its own base), so run the client against that URL."""
    return hub_of(request).config.base_url + PREFIX


async def get_tasks(request: Request) -> Response:
    hub = hub_of(request)
    member = await _agent(request, hub)
    lease_ms = int(hub.config.ag2_lease_seconds * 1000)
    # A poll that waits answers well inside its leases, so polling keeps them alive.
    wait_s = min(float_param(request, "wait", 0.0, MAX_WAIT), hub.config.ag2_lease_seconds / 2)
    # The shared lease outlives this poll's wait, so a poller that polls again at once
    # keeps it; one that stops lets a Worker take over a Worker's lapse later.
    held_ms = int(hub.config.worker_lease_seconds * 1000 + wait_s * 1000)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    first = True
    while True:
        woken = hub.notifier.event(inbox_key(member.id))

        def run(tx: Tx, extend: bool = first) -> tuple[list[tasks.Served], int | None]:
            # One lease per agent member across profiles (hub/leases.py): while a
            # `connect` Worker holds it, the queue takes nothing in and serves nothing.
            if leases.hold_for_queue(tx, member, held_ms) is None:
                return [], None
            served = tasks.poll(tx, member, now_ms(), lease_ms, extend)
            return served, tasks.next_expiry(tx, member)

        served, expiry = await hub.engine.write(run)
        first = False
        left = deadline - loop.time()
        if served or left <= 0 or hub.notifier.closed:
            break
        if expiry is not None:  # wake when a lease runs out, to serve it again
            left = min(left, max((expiry - now_ms()) / 1000 + 0.05, 0.05))
        await wait(woken, left)
    base = _base(request)
    out = await hub.engine.read(lambda db: [_envelope(db, member, s, base) for s in served])
    return _ok(200, wire.TasksOut(tasks=out))


def _envelope(db: Db, member: Member, s: tasks.Served, base: str) -> wire.TaskOut:
    room = rooms.room_by_id(db, s.task.room_id)
    ev: Event = s.event
    return wire.envelope(
        s.task,
        ev,
        room_name=room.name if room else "",
        sensitive=room.sensitive_filter if room else True,
        member=member,
        base=base,
    )


async def ack(request: Request) -> Response:
    hub = hub_of(request)
    member = await _agent(request, hub)
    task_id = request.path_params["id"]
    lease_ms = int(hub.config.ag2_lease_seconds * 1000)
    held = await hub.engine.write(lambda tx: tasks.ack(tx, member, task_id, now_ms(), lease_ms))
    if held is None:
        raise RequestError(Code.NOT_LEASED, f"task {task_id!r} is not leased to you")
    # AG2's broker places the intake reaction on the first ack, and the Worker leaves it to
    # the broker; keyed, so a re-ack or a second hub process places it once.
    try:
        await relations.react(
            hub, member, held.room_id, held.event_id, INTAKE_REACTION, f"ag2-ack:{task_id}"
        )
    except AgentpostError as exc:
        log.info("ag2: no intake reaction on %s (%s)", task_id, exc.code)
    return _ok(200, {"ok": True})


async def results(request: Request) -> Response:
    hub = hub_of(request)
    member = await _agent(request, hub)
    body = decode_json(await read_body(request, hub.config.max_json_bytes), wire.ResultIn)
    if body.status is None and (body.body is None or not body.body.strip()):
        raise RequestError(Code.INVALID_REQUEST, "body must not be blank", field="$.body")
    code = wire.error_code(body.error_code)
    normalized = {"body": body.body, "status": body.status, "error_code": body.error_code}
    fp = idempotency.fingerprint(RESULTS_ROUTE, body.id, normalized)

    def create(tx: Tx) -> Created:
        if body.status == "rejected":
            return answers.rejected(tx, member, body.id, code, now_ms())
        assert body.body is not None
        return answers.result(tx, member, body.id, body.body, now_ms())

    try:
        ans: Answer = await hub.idempotency.run(member.id, f"ag2-result:{body.id}", fp, create)
    except AgentpostError as exc:
        if exc.code is not Code.IDEMPOTENCY_CONFLICT:
            raise
        # AG2 deduplicates a result by its id whatever the body: the first one stays.
        return json_response(200, answers.DUPLICATE)
    if ans.status == 422:  # the room refused the answer's content (sensitive-data filter)
        reason = msgspec.json.decode(ans.body).get("error", {}).get("reason", "refused")
        done = await hub.engine.write(
            lambda tx: answers.refused(tx, member, body.id, reason, now_ms())
        )
        return _ok(200, wire.ResultOut(ok=True, duplicate=not done, refused=reason))
    if ans.idempotency_status == idempotency.REPLAYED:
        return json_response(200, answers.DUPLICATE)
    return json_response(ans.status, ans.body)


async def room_op(request: Request) -> Response:
    hub = hub_of(request)
    member = await _agent(request, hub)
    op = decode_json(await read_body(request, hub.config.max_json_bytes), wire.RoomOpIn)
    room_id = wire.room_of(op.room_id)
    if op.op == "message":
        text = wire.with_mentions(
            _required(op.body, "body"), wire.mentioned(op.mentions, member.workspace_name)
        )
        return _ok(
            200, wire.RoomOpOut(ok=True, event_id=await _message(hub, member, room_id, text))
        )
    target = _required(op.event_id, "event_id")
    if op.op == "edit":
        done = await relations.edit(hub, member, room_id, target, _required(op.body, "body"))
    elif op.op == "react":
        done = await relations.react(hub, member, room_id, target, _required(op.key, "key"))
    else:
        done = await relations.redact(hub, member, room_id, target, op.reason)
    if done.event is None:  # a refusal recorded for its content: answered as recorded
        return json_response(done.answer.status, done.answer.body)
    return _ok(200, wire.RoomOpOut(ok=True, event_id=done.event.id))


def _required(value: str | None, field: str) -> str:
    if value is None or not value.strip():
        raise RequestError(Code.INVALID_REQUEST, f"{field} must not be blank", field=f"$.{field}")
    return value.strip()


async def _message(hub: Hub, member: Member, room_id: str, text: str) -> str:
    """A room op's message (answers.room_message). A task served again after its Worker
    lost it (a crash) already has the earlier attempt's reply: the new attempt's first
    message edits that one instead of posting a second reply, and its id is answered, so the
    Worker's later edits land on the one reply."""
    decided = await hub.engine.write(
        lambda tx: answers.room_message(tx, member, room_id, text), room_id
    )
    if isinstance(decided, Created):
        assert decided.event_id is not None
        return decided.event_id
    try:
        await relations.edit(hub, member, room_id, decided.reply_event, text)
    except AgentpostError as exc:  # the old reply cannot be edited: post a new one
        log.info("ag2: reply %s not reused (%s); posting anew", decided.reply_event, exc.code)
        made = await hub.engine.write(lambda tx: answers.post(tx, room_id, member, text), room_id)
        assert made.event_id is not None
        return made.event_id
    await hub.engine.write(lambda tx: answers.relink(tx, member, decided))
    return decided.reply_event


async def upload(request: Request) -> Response:
    hub = hub_of(request)
    member = await _agent(request, hub)
    room_id = wire.room_of(request.path_params["room"])
    cap = hub.config.max_upload_bytes
    raw = await read_body(request, cap * 4 // 3 + 2 * hub.config.max_json_bytes)
    body = decode_json(raw, wire.MediaIn)
    try:
        data = base64.b64decode(body.content_b64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise RequestError(
            Code.INVALID_REQUEST, "content_b64 is not base64", field="$.content_b64"
        ) from exc
    if len(data) > cap:
        raise RequestError(Code.PAYLOAD_TOO_LARGE, f"file is over {cap} bytes")
    await hub.engine.read(lambda db: visible_room(db, room_id, member))
    name = safe_name(posixpath.basename(body.filename.replace("\\", "/"))) or "file"
    mime = mimetypes.guess_type(name)[0] or "application/octet-stream"
    caption = (body.caption or "").strip()
    sha256 = await hub.blobs.put_bytes(data)
    row = MediaRow(
        id=new_id("md"),
        room_id=room_id,
        sha256=sha256,
        name=name,
        mime_type=mime,
        size=len(data),
        uploader=member.name,
        created_at=now_ms(),
    )

    def create(tx: Tx) -> Created:
        return posting.create_media_event(tx, room_id, member, row, caption)

    # A file sent for the task out in this room is keyed by that task: a Worker that
    # restarts and sends it again replays the first upload instead of posting it twice.
    linked = await hub.engine.read(lambda db: ag2.open_in_room(db, member.id, room_id))
    if linked is not None:
        named = hashlib.sha256(name.encode()).hexdigest()[:16]
        key = f"ag2-media:{linked.event_id}:{sha256}:{named}"
        normalized = {"name": name, "sha256": sha256, "caption": caption}
        fp = idempotency.fingerprint("POST /ag2/v1/rooms/{room}/media", room_id, normalized)
        ans = await hub.idempotency.run(member.id, key, fp, create)
        status, answer = ans.status, ans.body
    else:
        made = await hub.engine.write(create, room_id)
        status, answer = made.status, made.body
    if status >= 300:
        return json_response(status, answer)
    posted = msgspec.json.decode(answer)
    media_id, event_id = posted["media"]["id"], posted["event"]["id"]
    return _ok(
        200, wire.MediaOut(mxc=f"mxc://{member.workspace_name}/{media_id}", event_id=event_id)
    )


async def heartbeat(request: Request) -> Response:
    hub = hub_of(request)
    member = await _agent(request, hub)  # an authenticated request marks it seen (docs/presence.md)
    body = decode_json(await read_body(request, hub.config.max_json_bytes), wire.HeartbeatIn)
    released = await hub.engine.write(lambda tx: tasks.heartbeat(tx, member, body.inflight))
    if released:
        log.info(
            "ag2: %s has %s task(s) in hand, fewer than it acked: %d lease(s) served again",
            member.name,
            body.inflight,
            released,
        )
    return _ok(200, {"ok": True})


async def healthz(request: Request) -> Response:
    return _ok(200, {"ok": True, "status": "ok"})


ROUTES = [
    Route("/v1/tasks", get_tasks, methods=["GET"]),
    Route("/v1/tasks/{id}/ack", ack, methods=["POST"]),
    Route("/v1/results", results, methods=["POST"]),
    Route("/v1/room", room_op, methods=["POST"]),
    Route("/v1/rooms/{room}/media", upload, methods=["POST"]),
    Route("/v1/media/{media}", get_media, methods=["GET"]),
    Route("/v1/heartbeat", heartbeat, methods=["POST"]),
    Route("/v1/healthz", healthz, methods=["GET"]),
]
