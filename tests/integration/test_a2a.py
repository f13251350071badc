"""Agent members as A2A agents (docs/architecture.md#a2a, docs/a2a.md), called with the real
`a2a-sdk` client: the card resolved, `messageId` as the Idempotency-Key (one event and one task for
a retry, a conflict refused), states followed from delivery and the receipt, streaming,
cancel, and refusals. The agent's side is played through the HTTP API here (its inbox and a
receipt); tests/connect/test_a2a_worker.py puts a real Worker and ACP agent behind it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError, TaskNotCancelableError, TaskNotFoundError

from hubproc import HubProcess, Setup, make_setup

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 60))  # type: ignore[arg-type]


def agent_url(hub: HubProcess, agent: str = "bot") -> str:
    return f"{hub.url}/a2a/acme/{agent}"


async def with_client(
    hub: HubProcess, token: str, use: Callable[[Any], Awaitable[T]], streaming: bool = False
) -> T:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        client = await create_client(
            agent_url(hub), client_config=ClientConfig(httpx_client=http, streaming=streaming)
        )
        return await use(client)


def message(text: str, message_id: str, context_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=message_id,
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            context_id=context_id,
        )
    )


async def send(client: Any, req: SendMessageRequest) -> Task:
    got = [r async for r in client.send_message(req)]
    assert len(got) == 1 and got[0].HasField("task"), got
    return got[0].task


def room_events(setup: Setup, token: str, room: str) -> list[dict]:
    with setup.hub.client(token) as c:
        r = c.get(f"/v1/rooms/{room}/events", params={"after": 0})
        assert r.status_code == 200, r.text
        return r.json()["events"]


def bot_reads_and_answers(setup: Setup, task_id: str, room: str, kind: str, text: str) -> dict:
    """The agent's side: take the call from the inbox (it is read), then post the receipt."""
    with setup.hub.client(setup.tokens["bot"]) as bot:
        r = bot.get("/v1/inbox")
        assert r.status_code == 200, r.text
        assert task_id in [i["event"]["id"] for i in r.json()["items"]], r.text
        r = bot.post(
            f"/v1/rooms/{room}/messages",
            json={"text": text, "in_reply_to": task_id, "reply_kind": kind},
        )
        assert r.status_code == 201, r.text
        return r.json()["event"]


@pytest.fixture
def a2a(make_hub: Callable[..., HubProcess]) -> Setup:
    # The push configs here name a loopback port, which the operator must allow.
    hub = make_hub(env={"AGENTPOST_PUSH_ALLOW": "127.0.0.1"})
    return make_setup(hub, ["alice", "carol"], ["bot", "helper"])


def test_the_card_names_the_json_rpc_interface_and_bearer(a2a: Setup) -> None:
    async def card() -> Any:
        headers = {"Authorization": f"Bearer {a2a.tokens['alice']}"}
        async with httpx.AsyncClient(headers=headers) as http:
            return await A2ACardResolver(http, agent_url(a2a.hub)).get_agent_card()

    got = run(card())
    assert got.name == "bot"
    (iface,) = got.supported_interfaces
    assert (iface.url, iface.protocol_binding, iface.protocol_version) == (
        agent_url(a2a.hub),
        "JSONRPC",
        "1.0",
    )
    assert "bearer" in got.security_schemes
    assert got.capabilities.streaming and got.capabilities.push_notifications
    with httpx.Client(base_url=a2a.hub.url) as anon:
        r = anon.get("/a2a/acme/bot/.well-known/agent-card.json")
        assert (r.status_code, r.json()["error"]["code"]) == (401, "unauthorized")
    with a2a.hub.client(a2a.tokens["alice"]) as c:
        r = c.get("/a2a/acme/alice/.well-known/agent-card.json")  # a person is no agent
        assert (r.status_code, r.json()["error"]["code"]) == (404, "member_not_found")
        r = c.get("/a2a/other/bot/.well-known/agent-card.json")
        assert (r.status_code, r.json()["error"]["code"]) == (404, "member_not_found")


def test_a_call_is_a_delegation_and_its_task_follows_delivery_and_the_receipt(
    a2a: Setup,
) -> None:
    async def call(client: Any) -> Task:
        return await send(client, message("summarise the report", "msg-1"))

    task = run(with_client(a2a.hub, a2a.tokens["alice"], call))
    assert task.status.state == TaskState.TASK_STATE_SUBMITTED
    room = task.context_id
    (ev,) = room_events(a2a, a2a.tokens["alice"], room)
    assert ev["id"] == task.id
    assert ev["text"] == "@bot summarise the report"
    assert ev["targets"] == ["bot"]
    assert ev["metadata"]["delegated_by"] == "alice"
    assert ev["metadata"]["delegated_to"] == ["bot"]
    meta = ev["metadata"]["a2a"]
    assert (meta["agent"], meta["message_id"]) == ("bot", "msg-1")
    assert meta["agent_id"].startswith("mb_") and meta["caller_id"].startswith("mb_")

    reply = bot_reads_and_answers(a2a, task.id, room, "result", "three points: a, b, c")

    async def get(client: Any) -> Task:
        return await client.get_task(GetTaskRequest(id=task.id))

    done = run(with_client(a2a.hub, a2a.tokens["alice"], get))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    (artifact,) = done.artifacts
    assert artifact.artifact_id == reply["id"]
    assert [p.text for p in artifact.parts] == ["three points: a, b, c"]
    assert done.history[0].message_id == "msg-1"


def test_a_retry_with_the_same_message_id_is_the_same_task_and_one_event(a2a: Setup) -> None:
    async def twice(client: Any) -> tuple[Task, Task]:
        first = await send(client, message("do it once", "same-id"))
        again = await send(client, message("do it once", "same-id"))
        return first, again

    first, again = run(with_client(a2a.hub, a2a.tokens["alice"], twice))
    assert first.id == again.id
    assert [e["id"] for e in room_events(a2a, a2a.tokens["alice"], first.context_id)] == [first.id]


def test_the_same_message_id_with_other_content_is_refused_naming_the_conflict(
    a2a: Setup,
) -> None:
    async def conflict(client: Any) -> Task:
        first = await send(client, message("one thing", "dup-id"))
        with pytest.raises(InvalidParamsError, match="idempotency_conflict"):
            await send(client, message("another thing", "dup-id"))
        return first

    first = run(with_client(a2a.hub, a2a.tokens["alice"], conflict))
    assert len(room_events(a2a, a2a.tokens["alice"], first.context_id)) == 1


def test_message_ids_are_per_caller(a2a: Setup) -> None:
    async def call(client: Any) -> Task:
        return await send(client, message("hello", "shared-id"))

    mine = run(with_client(a2a.hub, a2a.tokens["alice"], call))
    theirs = run(with_client(a2a.hub, a2a.tokens["carol"], call))
    assert mine.id != theirs.id and mine.context_id != theirs.context_id


def test_another_member_cannot_see_a_task_that_is_not_theirs(a2a: Setup) -> None:
    async def call(client: Any) -> Task:
        return await send(client, message("private", "p-1"))

    task = run(with_client(a2a.hub, a2a.tokens["alice"], call))

    async def peek(client: Any) -> None:
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=task.id))

    run(with_client(a2a.hub, a2a.tokens["carol"], peek))


def test_states_for_error_needs_input_and_a_removed_agent(a2a: Setup) -> None:
    async def call(client: Any) -> list[Task]:
        return [await send(client, message(f"job {i}", f"j-{i}")) for i in range(3)]

    failing, asking, orphan = run(with_client(a2a.hub, a2a.tokens["alice"], call))
    bot_reads_and_answers(a2a, failing.id, failing.context_id, "error", "the tool broke")
    asked = bot_reads_and_answers(a2a, asking.id, asking.context_id, "needs_input", "which year?")
    with a2a.hub.client(a2a.hub.admin_token) as admin:
        assert admin.delete("/v1/admin/workspaces/acme/members/helper").status_code == 200

    async def get_all(client: Any) -> list[Task]:
        return [await client.get_task(GetTaskRequest(id=t.id)) for t in (failing, asking)]

    failed, waiting = run(with_client(a2a.hub, a2a.tokens["alice"], get_all))
    assert failed.status.state == TaskState.TASK_STATE_FAILED
    assert [p.text for p in failed.status.message.parts] == ["the tool broke"]
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert waiting.status.message.message_id == asked["id"]
    assert orphan.status.state == TaskState.TASK_STATE_SUBMITTED

    async def to_helper(client: Any) -> None:
        with pytest.raises(A2AClientError, match="404"):
            await send(client, message("you are gone", "h-1"))

    with pytest.raises(A2AClientError):  # the card of a removed agent is gone too
        run(_client_for(a2a, "helper", to_helper))


async def _client_for(setup: Setup, agent: str, use: Callable[[Any], Awaitable[T]]) -> T:
    token = setup.tokens["alice"]
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        client = await create_client(
            agent_url(setup.hub, agent), client_config=ClientConfig(httpx_client=http)
        )
        return await use(client)


def test_streaming_follows_the_task_to_completed(a2a: Setup) -> None:
    seen: list[StreamResponse] = []

    async def stream(client: Any) -> None:
        async for update in client.send_message(message("stream it", "s-1")):
            seen.append(update)
            if len(seen) == 1:
                task = update.task
                await asyncio.to_thread(
                    bot_reads_and_answers, a2a, task.id, task.context_id, "result", "streamed"
                )

    run(with_client(a2a.hub, a2a.tokens["alice"], stream, streaming=True))
    assert seen[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    kinds = [u.WhichOneof("payload") for u in seen[1:]]
    assert "artifact_update" in kinds and kinds[-1] == "status_update", kinds
    assert seen[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    (art,) = [u.artifact_update.artifact for u in seen if u.HasField("artifact_update")]
    assert [p.text for p in art.parts] == ["streamed"]


def test_subscribe_and_cancel(a2a: Setup) -> None:
    async def call(client: Any) -> Task:
        return await send(client, message("long job", "c-1"))

    task = run(with_client(a2a.hub, a2a.tokens["alice"], call))

    async def cancel(client: Any) -> Task:
        return await client.cancel_task(CancelTaskRequest(id=task.id))

    still = run(with_client(a2a.hub, a2a.tokens["alice"], cancel))
    assert still.status.state == TaskState.TASK_STATE_SUBMITTED  # until the Worker says so
    stop = room_events(a2a, a2a.tokens["alice"], task.context_id)[-1]
    assert (stop["text"], stop["targets"]) == ("/stop @bot", ["bot"])
    seen: list[StreamResponse] = []

    async def subscribe(client: Any) -> None:
        async for update in client.subscribe(SubscribeToTaskRequest(id=task.id)):
            seen.append(update)
            if len(seen) == 1:
                await asyncio.to_thread(
                    bot_reads_and_answers, a2a, task.id, task.context_id, "cancelled", "stopped"
                )

    run(with_client(a2a.hub, a2a.tokens["alice"], subscribe, streaming=True))
    assert seen[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED

    async def cancel_again(client: Any) -> None:
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task.id))

    run(with_client(a2a.hub, a2a.tokens["alice"], cancel_again))


def test_a_file_part_becomes_a_file_of_the_room_attached_to_the_call(a2a: Setup) -> None:
    req = message("see the file", "file-1")
    req.message.parts.append(
        Part(raw=b"col1,col2\n1,2\n", filename="data.csv", media_type="text/csv")
    )

    async def twice(client: Any) -> tuple[Task, Task]:
        return await send(client, req), await send(client, req)

    first, again = run(with_client(a2a.hub, a2a.tokens["alice"], twice))
    assert first.id == again.id
    (ev,) = room_events(a2a, a2a.tokens["alice"], first.context_id)
    (att,) = ev["attachments"]
    assert (att["name"], att["mime_type"], att["size"]) == ("data.csv", "text/csv", 14)
    with a2a.hub.client(a2a.tokens["bot"]) as bot:  # the agent reads it like any file
        assert bot.get(f"/v1/media/{att['id']}").content == b"col1,col2\n1,2\n"


def test_a_named_context_must_be_a_room_both_are_in(a2a: Setup) -> None:
    async def in_general(client: Any) -> Task:
        return await send(client, message("in the shared room", "g-1", context_id=a2a.room))

    task = run(with_client(a2a.hub, a2a.tokens["alice"], in_general))
    assert task.context_id == a2a.room

    async def nowhere(client: Any) -> None:
        with pytest.raises(InvalidParamsError, match="room_not_found"):
            await send(client, message("x", "g-2", context_id="rm_nosuch"))

    run(with_client(a2a.hub, a2a.tokens["alice"], nowhere))


def test_a_name_taken_again_after_a_hard_removal_finds_nothing_of_the_old_member(
    a2a: Setup,
) -> None:
    async def call(client: Any) -> Task:
        return await send(client, message("my secret plan", "old-1"))

    old = run(with_client(a2a.hub, a2a.tokens["carol"], call))
    with a2a.hub.client(a2a.hub.admin_token) as admin:
        r = admin.delete("/v1/admin/workspaces/acme/members/carol", params={"hard": "true"})
        assert r.status_code == 200, r.text
        r = admin.post("/v1/admin/workspaces/acme/members", json={"name": "carol", "kind": "human"})
        assert r.status_code == 201, r.text
        new_carol = r.json()["token"]

    async def as_new(client: Any) -> Task:
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id=old.id))
        return await send(client, message("hello", "new-1"))

    fresh = run(with_client(a2a.hub, new_carol, as_new))
    assert fresh.context_id != old.context_id
    with a2a.hub.client(new_carol) as c:
        assert c.get(f"/v1/rooms/{old.context_id}/events").status_code in (403, 404)


def test_a_caller_taken_out_of_the_direct_room_is_refused_not_put_back(a2a: Setup) -> None:
    async def call(client: Any) -> Task:
        return await send(client, message("first", "out-1"))

    task = run(with_client(a2a.hub, a2a.tokens["alice"], call))
    with a2a.hub.client(a2a.tokens["alice"]) as c:  # alice leaves the room herself
        r = c.delete(f"/v1/rooms/{task.context_id}/participants/alice")
        assert r.status_code == 200, r.text

    async def again(client: Any) -> None:
        with pytest.raises(InvalidParamsError, match="channel_membership_required"):
            await send(client, message("second", "out-2"))

    run(with_client(a2a.hub, a2a.tokens["alice"], again))
    with a2a.hub.client(a2a.tokens["alice"]) as c:
        assert c.get(f"/v1/rooms/{task.context_id}/events").status_code in (403, 404)


def _push_params(task_id: str, **cfg: Any) -> bytes:
    params = {"taskId": task_id, "url": "http://127.0.0.1:9/hook", **cfg}
    body = {"jsonrpc": "2.0", "id": 7, "method": "CreateTaskPushNotificationConfig"}
    return json.dumps({**body, "params": params}).encode()


@pytest.mark.parametrize(
    "cfg",
    [
        {"url": "http://[::1/"},
        {"url": " http://127.0.0.1:9/hook"},
        {"url": "http://127.0.0.1:99999/"},
        {"url": "http://user:pw@127.0.0.1:9/"},
        {"url": "http://127.0.0.1/" + "x" * 3000},
        {"url": "ftp://127.0.0.1/"},
        {"id": "é"},
        {"token": "tökén"},
        {"token": "t" * 600},
        {"authentication": {"scheme": "Bearer", "credentials": "a\r\nX-Evil: 1"}},
    ],
)
def test_push_configs_the_sender_could_not_use_are_refused(a2a: Setup, cfg: dict) -> None:
    async def call(client: Any) -> Task:
        return await send(client, message("push me", "push-bad"))

    task = run(with_client(a2a.hub, a2a.tokens["alice"], call))
    with a2a.hub.client(a2a.tokens["alice"]) as c:
        r = c.post(
            "/a2a/acme/bot",
            content=_push_params(task.id, **cfg),
            headers={"content-type": "application/json"},
        )
        assert r.status_code == 200, r.text
        assert r.json()["error"]["code"] == -32602, r.text
        listed = c.post(
            "/a2a/acme/bot",
            json={
                "jsonrpc": "2.0",
                "id": 8,
                "method": "ListTaskPushNotificationConfigs",
                "params": {"taskId": task.id},
            },
        )
    assert listed.json()["result"]["configs"] == []


def test_a_task_takes_at_most_ten_push_configs(a2a: Setup) -> None:
    async def call(client: Any) -> Task:
        return await send(client, message("many hooks", "push-many"))

    task = run(with_client(a2a.hub, a2a.tokens["alice"], call))
    with a2a.hub.client(a2a.tokens["alice"]) as c:
        codes = [
            c.post(
                "/a2a/acme/bot",
                content=_push_params(task.id, id=f"c{i}"),
                headers={"content-type": "application/json"},
            ).json()
            for i in range(11)
        ]
    assert all("result" in x for x in codes[:10]), codes
    assert codes[10]["error"]["code"] == -32602
    assert "at most 10" in codes[10]["error"]["message"]


def _nested(depth: int) -> object:
    value: object = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"k":' * 2000 + b'"leaf"' + b"}" * 2000, -32600),
        (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {
                        "message": {
                            "messageId": "deep-1",
                            "parts": [{"text": "x"}, {"data": _nested(40)}],
                        }
                    },
                }
            ).encode(),
            -32602,
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message":'
            b' {"messageId": "", "parts": [{"text": "x"}]}}}',
            -32602,
        ),
    ],
)
def test_deep_json_and_an_empty_message_id_are_refused_plainly(
    a2a: Setup, body: bytes, code: int
) -> None:
    with a2a.hub.client(a2a.tokens["alice"]) as c:
        r = c.post("/a2a/acme/bot", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text
        assert r.json()["error"]["code"] == code, r.text
        rooms = c.get("/v1/workspaces/acme/rooms").json()
    assert [x["name"] for x in rooms["rooms"]] == ["general"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{not json", -32700),
        (b'{"jsonrpc": "2.0", "method": 5}', -32600),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "NoSuch"}', -32601),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}', -32602),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message":'
            b' {"messageId": "has space", "parts": [{"text": "x"}]}}}',
            -32602,
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message":'
            b' {"messageId": "f-1", "parts": [{"url": "http://127.0.0.1:9/x", "filename": "a"}]}}}',
            -32005,
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message":'
            b' {"messageId": "f-2", "parts": [{"raw": "not base64!", "filename": "a.txt"}]}}}',
            -32602,
        ),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "CreateTaskPushNotificationConfig",'
            b' "params": {"taskId": "ev_nosuch", "url": "http://127.0.0.1:9/"}}',
            -32001,
        ),
    ],
)
def test_bad_calls_get_a_json_rpc_error_and_change_nothing(
    a2a: Setup, body: bytes, code: int
) -> None:
    with a2a.hub.client(a2a.tokens["alice"]) as c:
        r = c.post("/a2a/acme/bot", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text
        assert r.json()["error"]["code"] == code, r.text
        assert r.json()["error"]["message"]
        rooms = c.get("/v1/workspaces/acme/rooms").json()
    assert [x["name"] for x in rooms["rooms"]] == ["general"], json.dumps(rooms)
