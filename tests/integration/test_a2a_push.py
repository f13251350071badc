"""A2A push that can be trusted (docs/a2a.md, docs/architecture.md#a2a): set with the real
a2a-sdk client, sent from the hub's durable outbox to a real HTTP receiver on loopback (which the
operator allows: AGENTPOST_PUSH_ALLOW), retried after failures with one stable id, signed
with the config's signing secret, never held up by a dead endpoint, and still sent after the
hub is killed with SIGKILL."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from a2a.types.a2a_pb2 import (
    DeleteTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    SendMessageConfiguration,
    Task,
    TaskPushNotificationConfig,
)
from test_a2a import bot_reads_and_answers, message, run, send, with_client

from hubproc import HubProcess, Setup, make_setup, poll


@dataclass
class Receiver:
    """A webhook receiver: answers 500 to the first `fail` posts, then 204; `hang` never
    answers (a dead endpoint that keeps the connection open)."""

    fail: int = 0
    hang: bool = False
    got: list[tuple[dict[str, str], bytes, int]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # when each post came (monotonic)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self, port: int = 0) -> Receiver:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers["content-length"]))
                if outer.hang:
                    time.sleep(30)
                    return
                status = 500 if len(outer.got) < outer.fail else 204
                outer.times.append(time.monotonic())
                outer.got.append(({k.lower(): v for k, v in self.headers.items()}, body, status))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    made: list[Receiver] = []
    yield made
    for r in made:
        r.stop()


def receiver(made: list[Receiver], port: int = 0, **kw: Any) -> Receiver:
    r = Receiver(**kw).start(port)
    made.append(r)
    return r


# The receivers here listen on loopback, which a push reaches only when the operator allows.
ALLOW_LOOPBACK = {"AGENTPOST_PUSH_ALLOW": "127.0.0.0/8,::1"}
SECRET_META = "agentpost/pushSigningSecret"


@pytest.fixture
def a2a(make_hub: Callable[..., HubProcess]) -> Setup:
    return make_setup(make_hub(env=ALLOW_LOOPBACK), ["alice"], ["bot"])


def send_with_push(setup: Setup, text: str, mid: str, url: str, token: str) -> Task:
    req = message(text, mid)
    req.configuration.CopyFrom(
        SendMessageConfiguration(
            task_push_notification_config=TaskPushNotificationConfig(url=url, token=token)
        )
    )

    async def call(client: Any) -> Task:
        return await send(client, req)

    return run(with_client(setup.hub, setup.tokens["alice"], call))


def genuine(headers: dict[str, str], body: bytes, secret: str) -> bool:
    """docs/a2a.md's check, as a receiver runs it."""
    parts = dict(p.split("=", 1) for p in headers["x-agentpost-signature"].split(","))
    signed = f"{headers['x-agentpost-notification-id']}.{parts['t']}.".encode() + body
    want = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(parts["v1"], want)


def check_signature(headers: dict[str, str], body: bytes, secret: str) -> None:
    assert genuine(headers, body, secret)


def create_config(setup: Setup, task_id: str, config_id: str, url: str) -> dict[str, Any]:
    """CreateTaskPushNotificationConfig by hand: the SDK's proto drops `signingSecret`."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "CreateTaskPushNotificationConfig",
        "params": {"taskId": task_id, "id": config_id, "url": url},
    }
    with setup.hub.client(setup.tokens["alice"]) as c:
        answer = c.post(f"/a2a/{setup.workspace}/bot", json=body).json()
    assert "result" in answer, answer
    return dict(answer["result"])


def secret_of(task: Task) -> str:
    """The signing secret a SendMessage with a push config answers with, once."""
    return str(task.metadata[SECRET_META])


def test_a_receiver_that_fails_twice_gets_the_result_with_one_stable_id(
    a2a: Setup, receivers: list[Receiver]
) -> None:
    hook = receiver(receivers, fail=2)
    task = send_with_push(a2a, "report please", "p-1", hook.url, "s3cret")
    reply = bot_reads_and_answers(a2a, task.id, task.context_id, "result", "here it is")
    poll(lambda: any(status == 204 for _h, _b, status in hook.got), timeout=30)
    assert [status for _h, _b, status in hook.got] == [500, 500, 204]
    ids = {h["x-agentpost-notification-id"] for h, _b, _s in hook.got}
    assert len(ids) == 1, ids
    headers, body, _ = hook.got[-1]
    assert headers["x-a2a-notification-token"] == "s3cret"
    check_signature(headers, body, secret_of(task))
    assert not genuine(headers, body, "s3cret")  # the token sent beside it signs nothing
    sent = json.loads(body)["task"]
    assert sent["id"] == task.id
    assert sent["status"]["state"] == "TASK_STATE_COMPLETED"
    assert sent["artifacts"][0]["artifactId"] == reply["id"]
    assert sent["artifacts"][0]["parts"] == [{"text": "here it is"}]


def test_retries_come_after_1_2_and_5_seconds_as_documented(
    a2a: Setup, receivers: list[Receiver]
) -> None:
    """docs/a2a.md: after a failure the next attempt comes 1, 2, then 5 s later (each
    measured from the failed answer), not a polling interval later."""
    hook = receiver(receivers, fail=3)
    task = send_with_push(a2a, "time the retries", "p-t", hook.url, "")
    bot_reads_and_answers(a2a, task.id, task.context_id, "result", "timed")
    poll(lambda: len(hook.times) == 4, timeout=30)
    gaps = [b - a for a, b in zip(hook.times, hook.times[1:], strict=False)]
    for gap, want in zip(gaps, (1, 2, 5), strict=True):
        assert want - 0.05 <= gap <= want + 0.6, gaps


def test_a_dead_endpoint_never_holds_up_another(a2a: Setup, receivers: list[Receiver]) -> None:
    dead, alive = receiver(receivers, hang=True), receiver(receivers)
    task = send_with_push(a2a, "two hooks", "p-2", dead.url, "t1")

    made = create_config(a2a, task.id, "second", alive.url)
    assert (made["id"], made["url"]) == ("second", alive.url)
    bot_reads_and_answers(a2a, task.id, task.context_id, "result", "done")
    started = time.monotonic()
    poll(lambda: alive.got, timeout=30)
    assert time.monotonic() - started < 8  # well before the dead one's 10 s timeout
    headers, body, _ = alive.got[0]
    assert "x-a2a-notification-token" not in headers  # no token given, none sent
    check_signature(headers, body, made["signingSecret"])  # signed all the same, by its own secret


def test_configs_are_listed_and_deleted_and_a_deleted_one_is_not_sent(
    a2a: Setup, receivers: list[Receiver]
) -> None:
    hook = receiver(receivers)
    forgotten = send_with_push(a2a, "then forget it", "p-3", hook.url, "tok")

    async def manage(client: Any) -> list[str]:
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=forgotten.id)
        )
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=forgotten.id, id="default")
        )
        after = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=forgotten.id)
        )
        return [c.id for c in listed.configs] + ["|"] + [c.id for c in after.configs]

    assert run(with_client(a2a.hub, a2a.tokens["alice"], manage)) == ["default", "|"]
    bot_reads_and_answers(a2a, forgotten.id, forgotten.context_id, "result", "nobody hears")
    kept = send_with_push(a2a, "this one is heard", "p-3b", hook.url, "tok")
    bot_reads_and_answers(a2a, kept.id, kept.context_id, "result", "heard")
    poll(lambda: hook.got, timeout=30)  # the later notification came: the earlier never will
    assert [json.loads(b)["task"]["id"] for _h, b, _s in hook.got] == [kept.id]


def test_a_notification_queued_before_a_kill_9_is_sent_after_the_restart(
    a2a: Setup, receivers: list[Receiver]
) -> None:
    down = receiver(receivers)
    assert down.server is not None
    port = down.server.server_address[1]
    down.stop()  # the receiver is down: every attempt fails and the outbox keeps the row
    task = send_with_push(a2a, "survive a crash", "p-4", f"http://127.0.0.1:{port}/hook", "k")
    bot_reads_and_answers(a2a, task.id, task.context_id, "result", "durable")
    a2a.hub.kill()  # SIGKILL
    back = receiver(receivers, port=port)
    a2a.hub.start()
    # A send cut by the kill holds its row for the lease (15 s), then backoff: well in 45 s.
    poll(lambda: back.got, timeout=45)
    headers, body, _ = back.got[0]
    assert json.loads(body)["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    check_signature(headers, body, secret_of(task))
