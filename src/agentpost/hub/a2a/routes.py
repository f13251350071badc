"""Every agent member as an A2A agent (docs/a2a.md, docs/architecture.md#a2a), mounted
under `/a2a`: its Agent Card at `/a2a/{ws}/{agent}/.well-known/agent-card.json` and the JSON-RPC binding
of A2A 1.0 at `/a2a/{ws}/{agent}`, bearer = the caller's member token.

`SendMessage` posts a delegation to the agent as the caller, through the hub's key rules:
`messageId` is the Idempotency-Key (per caller), so a retry is the same task and the same
id with another message is refused. The task is the delegation event; its state is read
from delivery state and the receipt (tasks.py)."""

from __future__ import annotations

import logging
import mimetypes
import secrets
from collections.abc import AsyncIterator
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import msgspec
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agentpost.core.clock import now_ms
from agentpost.core.errors import AgentpostError, Code, RequestError
from agentpost.core.ids import new_id
from agentpost.hub import auth, idempotency, mediatypes, posting, routing
from agentpost.hub.a2a import targets, tasks, wire
from agentpost.hub.decode import MAX_METADATA_DEPTH, read_body, within_depth
from agentpost.hub.errors import json_response
from agentpost.hub.idempotency import Created
from agentpost.hub.mediatypes import safe_name
from agentpost.hub.notify import room_key, wait
from agentpost.hub.state import Hub, hub_of
from agentpost.hub.submit import submit
from agentpost.store import a2a, media
from agentpost.store.a2a import PushConfig
from agentpost.store.engine import Db, Tx
from agentpost.store.models import MediaRow, Member

PREFIX = "/a2a"
SEND_ROUTE = "A2A SendMessage"
CANCEL_ROUTE = "A2A CancelTask"
# How often a task stream reads its task again without a wake-up (a receipt wakes it at
# once; being read or acknowledged by the agent's Worker does not).
POLL_SECONDS = 1.0
MAX_PUSH_CONFIGS = 10
# A config's signing secret in the answer that made it (never shown again): a field of
# the config, and in a SendMessage answer the task's metadata.
SECRET_FIELD = "signingSecret"
SECRET_META = "agentpost/pushSigningSecret"

_encode = msgspec.json.encode
log = logging.getLogger("agentpost.hub.a2a")


def _base(request: Request) -> str:
    """Where the URLs this wire writes start: the hub's configured public URL (or its bound
    address), never the request's Host, which the caller chooses."""
    return hub_of(request).config.base_url


async def _caller_and_agent(request: Request, hub: Hub) -> tuple[Member, Member]:
    """The caller (any member of the workspace, by its token) and the agent it calls."""
    caller = await auth.member(request, hub)
    ws, name = request.path_params["ws"], request.path_params["agent"]
    if ws != caller.workspace_name:
        raise RequestError(Code.MEMBER_NOT_FOUND, f"no agent {name!r} in this workspace")
    agent = await hub.engine.read(lambda db: tasks.agent_named(db, caller, name))
    return caller, agent


async def agent_card(request: Request) -> Response:
    hub = hub_of(request)
    caller, agent = await _caller_and_agent(request, hub)
    skill = {
        "id": "delegate",
        "name": f"Delegate to {agent.name}",
        "description": f"A task for the agent member {agent.name!r}, answered by its receipt",
        "tags": ["agentpost"],
    }
    description = (
        f"The agent member {agent.name!r} of the agentpost workspace {caller.workspace_name!r}"
    )
    body = wire.card(_base(request), caller.workspace_name, agent.name, description, [skill])
    return json_response(200, _encode(body))


async def rpc(request: Request) -> Response:
    hub = hub_of(request)
    caller, agent = await _caller_and_agent(request, hub)
    try:
        raw = await read_body(request, hub.config.max_json_bytes)
        req = msgspec.json.decode(raw, type=wire.Request)
    except RequestError as exc:  # the body is over the cap (files included: docs/a2a.md)
        return _answer(wire.error(None, _rpc_error(exc)))
    except msgspec.ValidationError as exc:
        bad = wire.RpcError(
            wire.INVALID_REQUEST, f"not a JSON-RPC request: {exc}", "invalid_request"
        )
        return _answer(wire.error(None, bad))
    except msgspec.DecodeError as exc:
        bad = wire.RpcError(wire.PARSE_ERROR, f"malformed JSON: {exc}", "parse_error")
        return _answer(wire.error(None, bad))
    except RecursionError:
        bad = wire.RpcError(wire.INVALID_REQUEST, "the JSON nests too deeply", "invalid_request")
        return _answer(wire.error(None, bad))
    call = _Call(hub, caller, agent, _base(request), req.id)
    try:
        if req.jsonrpc != "2.0":
            raise wire.RpcError(wire.INVALID_REQUEST, 'jsonrpc must be "2.0"', "invalid_request")
        method = _METHODS.get(req.method)
        if method is None:
            raise wire.RpcError(
                wire.METHOD_NOT_FOUND, f"no method {req.method!r}", "method_not_found"
            )
        return await method(call, req.params)
    except wire.RpcError as exc:
        return _answer(wire.error(req.id, exc))
    except AgentpostError as exc:
        if exc.code in (Code.UNAUTHORIZED, Code.MEMBER_REMOVED, Code.AGENT_REMOVED):
            raise  # the hub's own 401/403: the caller cannot go on
        return _answer(wire.error(req.id, _rpc_error(exc)))


def _rpc_error(exc: AgentpostError) -> wire.RpcError:
    """A hub refusal as a JSON-RPC error that keeps the hub's code and message."""
    code = {
        Code.IDEMPOTENCY_CONFLICT: wire.INVALID_PARAMS,
        Code.INVALID_REQUEST: wire.INVALID_PARAMS,
        Code.ROOM_NOT_FOUND: wire.INVALID_PARAMS,
        Code.CHANNEL_MEMBERSHIP_REQUIRED: wire.INVALID_PARAMS,
        Code.ROOM_ARCHIVED: wire.INVALID_PARAMS,
        Code.PAYLOAD_TOO_LARGE: wire.INVALID_PARAMS,
        Code.STORAGE_UNAVAILABLE: wire.INTERNAL_ERROR,
        Code.IDEMPOTENCY_IN_FLIGHT: wire.INTERNAL_ERROR,
    }.get(exc.code, wire.INVALID_REQUEST)
    return wire.RpcError(code, exc.message, str(exc.code))


def _answer(payload: dict[str, Any]) -> Response:
    return json_response(200, _encode(payload))


class _Call:
    def __init__(
        self, hub: Hub, caller: Member, agent: Member, base: str, rpc_id: str | int | None
    ) -> None:
        self.hub, self.caller, self.agent, self.base, self.rpc_id = hub, caller, agent, base, rpc_id

    async def task(self, task_id: str) -> dict[str, Any]:
        caller, agent, base = self.caller, self.agent, self.base

        def read(db: Db) -> dict[str, Any]:
            auth.still_active(db, caller)
            return tasks.task(db, caller, agent, task_id, base)

        return await self.hub.engine.read(read)

    async def send(self, params: dict[str, Any]) -> dict[str, Any]:
        """Post the call (or find the one a retry repeats); its task as it is now."""
        sent = wire.params(params, wire.SendIn)
        message = sent.message
        if message.task_id:
            raise wire.RpcError(
                wire.UNSUPPORTED_OPERATION,
                "continuing a task (taskId) is not supported: send a new message with the"
                " task's contextId",
                "unsupported_operation",
            )
        key = wire.key_of(message.message_id)
        push = sent.configuration.get("taskPushNotificationConfig")
        if push is not None and not isinstance(push, dict):
            raise wire.RpcError(
                wire.INVALID_PARAMS,
                "configuration.taskPushNotificationConfig must be an object",
                "invalid_request",
            )
        if push is not None:  # a config the hub would refuse is refused before the post
            pushed = wire.params({**push, "taskId": "-"}, wire.PushConfigIn)
            await _check_target(self.hub, wire.push_config(pushed)[0])
        text, data, files = wire.contents_of(message, self.hub.config.max_upload_bytes)
        caller, agent = self.caller, self.agent
        if not all(within_depth(x, MAX_METADATA_DEPTH) for x in (message.metadata, *data)):
            raise wire.RpcError(
                wire.INVALID_PARAMS,
                f"metadata and data parts may nest at most {MAX_METADATA_DEPTH} levels",
                "invalid_request",
            )
        a2a: dict[str, Any] = {
            "agent": agent.name,
            "agent_id": agent.id,
            "caller_id": caller.id,
            "message_id": message.message_id,
        }
        if data:
            a2a["data"] = data
        # An agent's Worker calling through this hub as a person (`connect --a2a`) names the
        # Turn it serves: the call is that chain's traffic, fenced as the agent's own
        # (docs/delegation.md "Cause"); a Worker never wakes itself anew through a remote.
        metadata = dict(message.metadata)
        named = metadata.pop(wire.CAUSE_META, None)
        trigger = named if isinstance(named, str) and named else None
        normalized: dict[str, Any] = {
            "text": f"@{agent.name} {text}" if text else f"@{agent.name}",
            "metadata": {**routing.strip_server_owned(metadata), "a2a": a2a},
            "in_reply_to": None,
            "reply_kind": None,
            "attachments": [],
        }
        where = message.context_id or tasks.direct_name(caller, agent)
        if files and message.context_id:  # refused before any file is stored
            await self.hub.engine.read(
                lambda db: tasks.room_for_read(db, caller, agent, message.context_id)
            )
        stored = [await self._store(f) for f in files]  # content-addressed: a retry is free
        # The files by content, not by the ids a first try gave them: a retry is the same.
        described = [(m.sha256, m.name, m.mime_type) for m in stored]
        fp = idempotency.fingerprint(SEND_ROUTE, where, {**normalized, "files": described})

        def create(tx: Tx) -> Created:
            room = tasks.room_for(tx, caller, agent, message.context_id)
            ids = []
            for m in stored:  # the files become media of the room, attached to the call
                row = msgspec.structs.replace(m, id=new_id("md"), room_id=room.id)
                media.insert(tx, row)
                ids.append(row.id)
            post = {**normalized, "attachments": ids}
            return posting.create_message(
                tx, room.id, caller, post, delegate=True, trigger=trigger
            )

        ans = await submit(self.hub, SEND_ROUTE, caller.id, key, fp, create, None, where)
        if ans.status >= 300:  # a recorded refusal (the room's sensitive-data filter)
            found = msgspec.json.decode(ans.body)["error"]
            raise wire.RpcError(wire.INVALID_PARAMS, found["message"], str(found["code"]))
        task_id = tasks.event_of(ans.body).id
        task = await self.task(task_id)
        if push is not None:  # set again on a retry: the same config, replaced
            made = await self.set_push({**push, "taskId": task_id})
            # The config's signing secret, shown this once (docs/a2a.md "Push").
            meta = {**task.get("metadata", {}), SECRET_META: made[SECRET_FIELD]}
            task = {**task, "metadata": meta}
        return task

    async def set_push(self, params: dict[str, Any]) -> dict[str, Any]:
        """Create (or replace, by id) a push config of one of the caller's tasks; at most
        MAX_PUSH_CONFIGS per task."""
        got = wire.params(params, wire.PushConfigIn)
        url, config_id, token, scheme, credentials = wire.push_config(got)
        await self.task(got.task_id)  # the caller's task, or TaskNotFound
        await _check_target(self.hub, url)
        cfg = PushConfig(
            task_id=got.task_id,
            id=config_id,
            member_id=self.caller.id,
            url=url,
            token=token,
            auth_scheme=scheme,
            auth_credentials=credentials,
            base_url=self.base,
            created_at=now_ms(),
            secret=secrets.token_urlsafe(32),
        )

        def put(tx: Tx) -> None:
            others = [c for c in a2a.configs(tx, cfg.task_id) if c.id != cfg.id]
            if len(others) >= MAX_PUSH_CONFIGS:
                raise RequestError(
                    Code.INVALID_REQUEST,
                    f"a task has at most {MAX_PUSH_CONFIGS} push configs; delete one first",
                )
            a2a.put_config(tx, cfg)

        await self.hub.engine.write(put, got.task_id)
        return {**_push_out(cfg), SECRET_FIELD: cfg.secret}  # the only time it is shown

    async def push_configs(self, task_id: str) -> list[PushConfig]:
        await self.task(task_id)
        return await self.hub.engine.read(lambda db: a2a.configs(db, task_id))

    async def _store(self, f: wire.FileIn) -> MediaRow:
        """A file part's bytes in the blob store; its media row, for a room not known yet."""
        name = safe_name(PurePosixPath(f.name.replace("\\", "/")).name)[:255] or "upload"
        mime = mediatypes.normalized(f.media_type) if f.media_type else None
        sha256 = await self.hub.blobs.put_bytes(f.data)
        return MediaRow(
            id="",
            room_id="",
            sha256=sha256,
            name=name,
            mime_type=mime or mimetypes.guess_type(name)[0] or mediatypes.DEFAULT,
            size=len(f.data),
            uploader=self.caller.name,
            created_at=now_ms(),
        )

    async def cancel(self, task_id: str) -> dict[str, Any]:
        """Ask the agent's Worker to stop (`/stop @agent` in the task's room, as the room's
        cancel does); the task turns CANCELED when its Worker's receipt says so."""
        now = await self.task(task_id)
        if now["status"]["state"] in wire.TERMINAL:
            raise wire.RpcError(
                wire.TASK_NOT_CANCELABLE,
                f"the task is {now['status']['state']}: nothing to cancel",
                "task_not_cancelable",
            )
        caller, room_id = self.caller, now["contextId"]
        normalized: dict[str, Any] = {
            "text": f"{routing.STOP} @{self.agent.name}",
            "metadata": {},
            "in_reply_to": None,
            "reply_kind": None,
            "attachments": [],
        }

        def create(tx: Tx) -> Created:
            return posting.create_message(tx, room_id, caller, normalized)

        await submit(self.hub, CANCEL_ROUTE, caller.id, None, None, create, None, room_id)
        return await self.task(task_id)

    def stream(self, first: dict[str, Any]) -> Response:
        """The task's updates over SSE until it ends or is interrupted (INPUT_REQUIRED): the
        Task first, then a status update at each change, the result as an artifact update."""
        return StreamingResponse(self._frames(first), media_type="text/event-stream")

    async def _frames(self, first: dict[str, Any]) -> AsyncIterator[bytes]:
        """SSE frames, each with an id of its own (a count from 0, the Task)."""
        hub, task_id, room = self.hub, first["id"], first["contextId"]
        n = 0
        yield self._frame(n, {"task": first})
        state = first["status"]["state"]
        while state not in wire.TERMINAL and state != wire.INPUT_REQUIRED:
            woken = hub.notifier.event(room_key(room))
            try:
                now = await self.task(task_id)
            except AgentpostError as exc:  # the caller was removed meanwhile
                gone = wire.RpcError(wire.INVALID_REQUEST, exc.message, str(exc.code))
                yield self._frame(n + 1, None, gone)
                return
            if now["status"]["state"] == state:
                if hub.notifier.closed:
                    return
                await wait(woken, POLL_SECONDS)
                continue
            state = now["status"]["state"]
            ids = {"taskId": task_id, "contextId": room}
            for artifact in now["artifacts"]:
                n += 1
                update = {**ids, "artifact": artifact, "lastChunk": True}
                yield self._frame(n, {"artifactUpdate": update})
            n += 1
            yield self._frame(n, {"statusUpdate": {**ids, "status": now["status"]}})

    def _frame(self, n: int, result: Any, exc: wire.RpcError | None = None) -> bytes:
        body = wire.error(self.rpc_id, exc) if exc else wire.ok(self.rpc_id, result)
        return b"id: %d\ndata: " % n + _encode(body) + b"\n\n"


async def _check_target(hub: Hub, url: str) -> None:
    """Refuse a push URL whose host is internal (loopback, private, link-local…) unless the
    operator allows it: the same judge the sender applies to each connection."""
    parts = urlsplit(url)
    assert parts.hostname is not None  # wire.push_config made sure
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        await targets.checked(parts.hostname, port, targets.allow_list(hub.config.push_allow))
    except targets.TargetRefused as exc:
        raise wire.RpcError(wire.INVALID_PARAMS, exc.message, exc.reason) from None


def _push_out(cfg: PushConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"taskId": cfg.task_id, "id": cfg.id, "url": cfg.url}
    if cfg.token:
        out["token"] = cfg.token
    if cfg.auth_scheme:
        out["authentication"] = {"scheme": cfg.auth_scheme}  # credentials are not shown
    return out


async def _create_push(call: _Call, params: dict[str, Any]) -> Response:
    return _answer(wire.ok(call.rpc_id, await call.set_push(params)))


async def _get_push(call: _Call, params: dict[str, Any]) -> Response:
    got = wire.params(params, wire.PushConfigIdIn)
    found = [c for c in await call.push_configs(got.task_id) if c.id == (got.id or "default")]
    if not found:
        raise wire.RpcError(
            wire.INVALID_PARAMS, f"no push config {got.id!r} on this task", "push_config_not_found"
        )
    return _answer(wire.ok(call.rpc_id, _push_out(found[0])))


async def _list_push(call: _Call, params: dict[str, Any]) -> Response:
    got = wire.params(params, wire.PushConfigIdIn)
    configs = [_push_out(c) for c in await call.push_configs(got.task_id)]
    return _answer(wire.ok(call.rpc_id, {"configs": configs}))


async def _delete_push(call: _Call, params: dict[str, Any]) -> Response:
    got = wire.params(params, wire.PushConfigIdIn)
    await call.task(got.task_id)
    task_id, config_id = got.task_id, got.id or "default"
    gone = await call.hub.engine.write(lambda tx: a2a.delete_config(tx, task_id, config_id))
    if not gone:
        raise wire.RpcError(
            wire.INVALID_PARAMS, f"no push config {got.id!r} on this task", "push_config_not_found"
        )
    return _answer(wire.ok(call.rpc_id, {}))


async def _send(call: _Call, params: dict[str, Any]) -> Response:
    return _answer(wire.ok(call.rpc_id, {"task": await call.send(params)}))


async def _send_streaming(call: _Call, params: dict[str, Any]) -> Response:
    return call.stream(await call.send(params))


async def _get(call: _Call, params: dict[str, Any]) -> Response:
    found = wire.params(params, wire.TaskIdIn)
    return _answer(wire.ok(call.rpc_id, await call.task(found.id)))


async def _cancel(call: _Call, params: dict[str, Any]) -> Response:
    found = wire.params(params, wire.TaskIdIn)
    return _answer(wire.ok(call.rpc_id, await call.cancel(found.id)))


async def _subscribe(call: _Call, params: dict[str, Any]) -> Response:
    found = wire.params(params, wire.TaskIdIn)
    return call.stream(await call.task(found.id))


_METHODS = {
    "SendMessage": _send,
    "SendStreamingMessage": _send_streaming,
    "GetTask": _get,
    "CancelTask": _cancel,
    "SubscribeToTask": _subscribe,
    "CreateTaskPushNotificationConfig": _create_push,
    "GetTaskPushNotificationConfig": _get_push,
    "ListTaskPushNotificationConfigs": _list_push,
    "DeleteTaskPushNotificationConfig": _delete_push,
}

ROUTES = [
    Route("/{ws}/{agent}/.well-known/agent-card.json", agent_card, methods=["GET"]),
    Route("/{ws}/{agent}", rpc, methods=["POST"]),
]
