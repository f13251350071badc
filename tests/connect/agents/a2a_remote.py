#!/usr/bin/env python3
"""A real A2A 1.0 agent built on the `a2a-sdk` server side (JSON-RPC binding, in-memory task
store), standing in for a remote agent that agentpost calls out to.

    python tests/connect/agents/a2a_remote.py --port 0 --log FILE [--token TOKEN]

Once it listens it prints one line, `A2A_REMOTE_URL http://127.0.0.1:<port>`. The Agent Card
is at `<url>/.well-known/agent-card.json` (always public) and names one interface: JSONRPC,
protocol version 1.0, at `<url>/rpc`, streaming supported. With --token every other request
needs `Authorization: Bearer <token>`, or gets HTTP 401. SIGTERM ends it cleanly (exit 0).

The first word of the message text (its text parts joined by newlines; a Worker's framing
"<sender> in room <room>: " and @mentions skipped) picks the answer:
  slow N     WORKING, then after N seconds COMPLETED with the artifact text `slow done N`;
             a CancelTask during the wait ends it CANCELED at once
  fail ...   FAILED, status message `remote failure: <the rest of the text>`
  ask ...    INPUT_REQUIRED, status message `which one?`
  file NAME  COMPLETED, an artifact with the text `here is NAME` and a file part (raw bytes
             `made remotely: NAME\\n`, filename NAME, media type text/plain)
  anything else: COMPLETED, an artifact with the text `remote: <the whole text>`, then one
             line `got file <filename> (<n> bytes)` per file part (raw bytes) of the message
Every message the executor receives (SendMessage or SendStreamingMessage) appends one JSON
line to the --log file, {"message_id", "text", "context_id", "task_id"}, flushed and fsynced.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import json
import os
import re
import signal
import socket
import sys
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Message,
    Part,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.applications import Starlette

RPC_PATH = "/rpc"


class RemoteExecutor(AgentExecutor):
    def __init__(self, log_path: str) -> None:
        self.log_path = log_path
        # Task id -> set once a CancelTask arrived for it (wakes a `slow` wait).
        self.cancelled: dict[str, asyncio.Event] = {}

    def log(self, context: RequestContext, text: str) -> None:
        message = context.message
        line = {
            "message_id": message.message_id if message else "",
            "text": text,
            "context_id": context.context_id,
            "task_id": context.task_id,
        }
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
            f.flush()
            os.fsync(f.fileno())

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message or Message()
        text = "\n".join(p.text for p in message.parts if p.HasField("text"))
        self.log(context, text)
        task_id, context_id = str(context.task_id), str(context.context_id)
        # The command is the message's first word past a Worker's framing ("<sender> in room
        # <room>: ") and its @mentions.
        said = text.split(": ", 1)[1] if re.match(r"\S+ in room \S+: ", text) else text
        words = [w for w in said.split() if not w.startswith("@")]
        word = words[0] if words else ""
        updater = TaskUpdater(event_queue, task_id, context_id)
        if word == "slow":  # before any await, so a CancelTask can never miss it
            self.cancelled[task_id] = asyncio.Event()

        def agent_says(said: str) -> Message:
            return updater.new_agent_message([Part(text=said)])

        if context.current_task is None:
            # A new task: it has to be enqueued whole before any status update. A `slow` task
            # starts out WORKING, so that even a caller answered at once sees it working.
            state = (
                TaskState.TASK_STATE_WORKING if word == "slow" else TaskState.TASK_STATE_SUBMITTED
            )
            status = TaskStatus(state=state)
            status.timestamp.GetCurrentTime()
            await event_queue.enqueue_event(
                Task(id=task_id, context_id=context_id, status=status, history=[message])
            )
        elif word == "slow":
            await updater.start_work()

        if word == "slow":
            await self.slow(updater, words[1] if len(words) > 1 else "1")
        elif word == "fail":
            rest = " ".join(words[1:])
            await updater.failed(agent_says(f"remote failure: {rest}"))
        elif word == "ask":
            await updater.requires_input(agent_says("which one?"))
        elif word == "file":
            name = words[1] if len(words) > 1 else "unnamed.txt"
            parts = [
                Part(text=f"here is {name}"),
                Part(
                    raw=f"made remotely: {name}\n".encode(),
                    filename=name,
                    media_type="text/plain",
                ),
            ]
            await updater.add_artifact(parts, name=name)
            await updater.complete()
        else:
            answer = f"remote: {text}"
            for p in message.parts:
                if p.HasField("raw"):
                    answer += f"\ngot file {p.filename} ({len(p.raw)} bytes)"
            await updater.add_artifact([Part(text=answer)], name="answer")
            await updater.complete()

    async def slow(self, updater: TaskUpdater, arg: str) -> None:
        try:
            seconds = float(arg)
        except ValueError:
            seconds = 1.0
        cancelled = self.cancelled.setdefault(updater.task_id, asyncio.Event())
        try:
            await asyncio.wait_for(cancelled.wait(), seconds)
            return  # cancel() has written TASK_STATE_CANCELED
        except TimeoutError:
            pass
        finally:
            self.cancelled.pop(updater.task_id, None)
        await updater.add_artifact([Part(text=f"slow done {arg}")], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id = str(context.task_id)
        cancelled = self.cancelled.get(task_id)
        if cancelled is not None:
            cancelled.set()
        updater = TaskUpdater(event_queue, task_id, str(context.context_id))
        await updater.cancel(updater.new_agent_message([Part(text="cancelled")]))


def make_card(base: str, token: str | None) -> AgentCard:
    card = AgentCard(
        name="a2a-remote",
        description="A remote A2A agent for agentpost's tests.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=base + RPC_PATH,
                protocol_binding="JSONRPC",
                protocol_version="1.0",
            )
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="echo",
                name="echo",
                description="Answers `remote: <text>`; slow N, fail, ask and file NAME act up.",
                tags=["test"],
            )
        ],
    )
    if token:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
        )
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card


class BearerGate:
    """Pure ASGI (so SSE streams pass through untouched): every HTTP request other than the
    card's GET needs the bearer token."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] != AGENT_CARD_WELL_KNOWN_PATH:
            got = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                body = b'{"error": "unauthorized"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def make_app(base: str, log_path: str, token: str | None) -> Any:
    card = make_card(base, token)
    handler = DefaultRequestHandler(
        agent_executor=RemoteExecutor(log_path),
        task_store=InMemoryTaskStore(),
        agent_card=card,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()

    app = Starlette(
        routes=[
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, rpc_url=RPC_PATH),
        ],
        lifespan=lifespan,
    )
    return BearerGate(app, token) if token else app


async def serve(port: int, log_path: str, token: str | None) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.setblocking(False)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        make_app(base, log_path, token),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)

    # uvicorn takes SIGTERM/SIGINT while it serves and raises the signal again once it has
    # shut down; this handler then only asks it to stop, so the process exits with 0.
    def stop(_sig: int, _frame: Any) -> None:
        server.should_exit = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not serving.done():
        await asyncio.sleep(0.02)
    if server.started:
        print(f"A2A_REMOTE_URL {base}", flush=True)
    await serving


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", required=True, help="append one JSON line per message here")
    parser.add_argument("--token", default=None, help="require Authorization: Bearer TOKEN")
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.log, args.token))
    sys.exit(0)


if __name__ == "__main__":
    main()
