"""A2A calls answered by a real Worker (docs/architecture.md#a2a, docs/a2a.md): the real `a2a-sdk`
client calls `bot` as a person (alice, its owner); a real `agentpost connect` process with
an ACP test agent takes the call from bot's inbox and posts the receipt that ends the task.
tests/integration/test_a2a.py plays the agent's side through the HTTP API instead.

Covered: a call followed with GetTask to COMPLETED, the same call streamed, a kill -9 of
the hub between the call and its answer (the retry with the same `messageId` is the same
task and the Worker answers once), and CancelTask stopping the running Turn."""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError

from conftest import AGENTS, Connected, agent_cmd, quiet_for, wait_for
from hubproc import HubProcess, make_setup

T = TypeVar("T")
TRICK = AGENTS / "trick_agent.py"
TERMINAL = (
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
)
# The agent made the ACP session of a Turn: the Turn is running (agent.py logs it).
SESSION_MADE = re.compile(r"session \S+ for ")


# One hub per engine for the module's tests that never stop it (each has a workspace of
# its own, `connected`); the kill -9 test starts a hub of its own (`make_hub`).
@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


def run(coro: Awaitable[T], timeout: float = 150.0) -> T:
    return asyncio.run(asyncio.wait_for(coro, timeout))  # type: ignore[arg-type]


@asynccontextmanager
async def a2a_client(
    c: Connected, who: str = "alice", streaming: bool = False
) -> AsyncIterator[Any]:
    """An a2a-sdk client for `bot`, resolved from its Agent Card, with `who`'s token."""
    url = f"{c.hub.url}/a2a/{c.setup.workspace}/bot"
    headers = {"Authorization": f"Bearer {c.setup.tokens[who]}"}
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        yield await create_client(
            url, client_config=ClientConfig(httpx_client=http, streaming=streaming)
        )


def message(text: str, message_id: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(message_id=message_id, role=Role.ROLE_USER, parts=[Part(text=text)])
    )


async def send(client: Any, req: SendMessageRequest) -> Task:
    got = [r async for r in client.send_message(req)]
    assert len(got) == 1 and got[0].HasField("task"), got
    return got[0].task


def call(c: Connected, text: str, message_id: str) -> Task:
    async def go() -> Task:
        async with a2a_client(c) as client:
            return await send(client, message(text, message_id))

    return run(go())


def get_task(c: Connected, task_id: str) -> Task:
    async def go() -> Task:
        async with a2a_client(c) as client:
            return await client.get_task(GetTaskRequest(id=task_id))

    return run(go())


def until_state(c: Connected, task_id: str, want: int, timeout: float = 120.0) -> Task:
    """GetTask again until the task is in state `want`; fails at the deadline or when the
    task ends in another state."""

    async def go() -> Task:
        deadline = time.monotonic() + timeout
        async with a2a_client(c) as client:
            while True:
                task = await client.get_task(GetTaskRequest(id=task_id))
                state = task.status.state
                if state == want:
                    return task
                assert state not in TERMINAL, f"ended {TaskState.Name(state)}: {task}"
                assert time.monotonic() < deadline, f"still {TaskState.Name(state)}: {task}"
                await asyncio.sleep(0.1)  # the polling interval

    return run(go(), timeout + 30)


def room_events(c: Connected, room: str) -> list[dict[str, Any]]:
    with c.hub.client(c.setup.tokens["alice"]) as h:
        r = h.get(f"/v1/rooms/{room}/events", params={"after": 0, "limit": 1000})
    assert r.status_code == 200, r.text
    events: list[dict[str, Any]] = r.json()["events"]
    return events


def texts(task_or_artifact: Any) -> list[str]:
    return [p.text for p in task_or_artifact.parts]


def check_call_event(ev: dict[str, Any], task: Task, text: str, message_id: str) -> None:
    """The call is alice's delegation to bot, and the task is that event."""
    assert ev["id"] == task.id
    assert (ev["sender"], ev["text"], ev["targets"]) == ("alice", f"@bot {text}", ["bot"])
    assert ev["metadata"]["delegated_by"] == "alice"
    assert ev["metadata"]["delegated_to"] == ["bot"]
    meta = ev["metadata"]["a2a"]
    assert (meta["agent"], meta["message_id"]) == ("bot", message_id)


def test_a_call_is_answered_by_the_workers_agent_and_completes(connected: Connected) -> None:
    connected.worker()  # examples/echo_agent.py
    task = call(connected, "summarise the report", "w-1")
    assert task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    room = task.context_id
    assert room and room != connected.setup.room  # the pair's direct room, made for the call

    done = until_state(connected, task.id, TaskState.TASK_STATE_COMPLETED)
    answer = "echo: @bot summarise the report"
    (artifact,) = done.artifacts
    assert texts(artifact) == [answer]
    assert done.history[0].message_id == "w-1"

    wait_for(lambda: connected.acked() >= 1)  # the Worker is done with the call
    quiet_for(0.5)
    call_ev, reply = room_events(connected, room)  # exactly the call and one reply
    check_call_event(call_ev, task, "summarise the report", "w-1")
    assert reply["id"] == artifact.artifact_id
    assert (reply["sender"], reply["text"]) == ("bot", answer)
    assert (reply["in_reply_to"], reply["reply_kind"]) == (task.id, "result")
    with connected.hub.client(connected.setup.tokens["alice"]) as h:
        rooms = h.get(f"/v1/workspaces/{connected.setup.workspace}/rooms").json()["rooms"]
    (name,) = [r["name"] for r in rooms if r["id"] == room]
    assert name.startswith("a2a:alice:bot:"), name


def test_a_streamed_call_ends_with_the_answer_and_completed(connected: Connected) -> None:
    connected.worker()
    seen: list[StreamResponse] = []

    async def stream() -> None:
        async with a2a_client(connected, streaming=True) as client:
            async for update in client.send_message(message("stream it", "s-1")):
                seen.append(update)

    run(stream())  # it ends by itself once the task has ended
    first = seen[0].task
    assert first.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    kinds = [u.WhichOneof("payload") for u in seen[1:]]
    assert kinds and all(k in ("status_update", "artifact_update") for k in kinds), kinds
    assert kinds[-1] == "status_update", kinds
    last = seen[-1].status_update
    assert (last.task_id, last.context_id) == (first.id, first.context_id)
    assert last.status.state == TaskState.TASK_STATE_COMPLETED
    updates = [u.artifact_update for u in seen if u.HasField("artifact_update")]
    (update,) = updates
    assert update.task_id == first.id
    assert texts(update.artifact) == ["echo: @bot stream it"]

    wait_for(lambda: connected.acked() >= 1)
    quiet_for(0.5)
    call_ev, reply = room_events(connected, first.context_id)
    check_call_event(call_ev, first, "stream it", "s-1")
    assert reply["id"] == update.artifact.artifact_id
    assert (reply["in_reply_to"], reply["reply_kind"]) == (first.id, "result")
    assert get_task(connected, first.id).status.state == TaskState.TASK_STATE_COMPLETED


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _prompts(folder: Path) -> int:
    return len(list(folder.glob("prompt-*")))


def test_kill_9_of_the_hub_between_call_and_answer_one_task_one_answer(
    make_hub: Callable[..., HubProcess], tmp_path: Path
) -> None:
    # A port of its own, so the restarted hub is where the Worker and the client look.
    hub = make_hub(extra_args=["--port", str(_free_port())])
    c = Connected(make_setup(hub, ["alice", "carol"], ["bot", "helper"]), tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    try:
        c.worker(agent_cmd(TRICK), env={"TRICK_MARKER_DIR": str(marks)})
        task = call(c, "slow 4", "k-1")  # trick agent: answers "slow done 4" after 4 s
        wait_for(lambda: _prompts(marks) == 1)  # the Worker's agent is on the call
        assert get_task(c, task.id).status.state == TaskState.TASK_STATE_WORKING
        (only,) = room_events(c, task.context_id)  # no answer yet
        assert only["id"] == task.id

        url = hub.url
        assert hub.proc is not None
        hub.kill()
        assert hub.proc.returncode == -9  # really died by SIGKILL
        hub.start()
        assert hub.url == url

        again = call(c, "slow 4", "k-1")  # the client's retry: same messageId, same text
        assert (again.id, again.context_id) == (task.id, task.context_id)
        calls = [e for e in room_events(c, task.context_id) if e["sender"] == "alice"]
        assert [e["id"] for e in calls] == [task.id]
        check_call_event(calls[0], task, "slow 4", "k-1")

        done = until_state(c, task.id, TaskState.TASK_STATE_COMPLETED)
        (artifact,) = done.artifacts
        assert texts(artifact) == ["slow done 4"]
        wait_for(lambda: c.acked() >= 1, timeout=90)
        quiet_for(1.0)
        events = room_events(c, task.context_id)
        assert [e["id"] for e in events if e["sender"] == "alice"] == [task.id]
        (reply,) = [e for e in events if e["sender"] == "bot"]
        assert reply["id"] == artifact.artifact_id
        assert (reply["in_reply_to"], reply["reply_kind"]) == (task.id, "result")
        assert len(events) == 2
        assert _prompts(marks) == 1  # the agent was asked once
    finally:
        for worker in c.workers:
            worker.stop()


def test_cancel_task_stops_the_running_turn_and_the_task_is_canceled(
    connected: Connected,
) -> None:
    w = connected.worker()  # echo agent: `sleep N` waits N s unless the Turn is cancelled
    task = call(connected, "sleep 90", "c-1")
    until_state(connected, task.id, TaskState.TASK_STATE_WORKING)
    wait_for(lambda: SESSION_MADE.search(w.log()))  # the Turn is running

    async def cancel() -> Task:
        async with a2a_client(connected) as client:
            return await client.cancel_task(CancelTaskRequest(id=task.id))

    answered = run(cancel())
    # The cancel asks the Worker; the task turns CANCELED when its receipt lands.
    assert answered.status.state in (
        TaskState.TASK_STATE_WORKING,
        TaskState.TASK_STATE_CANCELED,
    ), answered
    # Within 60 s: the agent's 90 s sleep was stopped, not slept out.
    done = until_state(connected, task.id, TaskState.TASK_STATE_CANCELED, timeout=60)
    assert done.status.message.role == Role.ROLE_AGENT
    (said,) = texts(done.status.message)
    assert said.startswith("stopped early") and "(@bot's Turn was cancelled)" in said
    assert not done.artifacts

    wait_for(lambda: connected.acked() >= 2)  # the call and the stop
    quiet_for(0.5)
    call_ev, stop, reply = room_events(connected, task.context_id)
    check_call_event(call_ev, task, "sleep 90", "c-1")
    assert (stop["sender"], stop["text"], stop["targets"]) == ("alice", "/stop @bot", ["bot"])
    assert reply["id"] == done.status.message.message_id
    assert (reply["in_reply_to"], reply["reply_kind"]) == (task.id, "cancelled")
    assert "cancelling the Turn for " + task.id in w.log()

    async def cancel_again() -> None:
        async with a2a_client(connected) as client:
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=task.id))

    run(cancel_again())
