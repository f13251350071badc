"""Push targets a member must not reach (docs/a2a.md "Push targets",
docs/architecture.md#a2a): the metadata address, loopback in its spellings (dotted, decimal,
`[::1]`, IPv4-mapped IPv6, a name that resolves to it) are refused when the config is made,
by default, and allowed by the operator's AGENTPOST_PUSH_ALLOW; a target refused when the
notification goes is a logged failure, never a connection; the connection goes to the
address checked, with the URL's own Host; and a signature forged with the token sent beside
it fails the check."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from test_a2a import bot_reads_and_answers, message, run, send, with_client
from test_a2a_push import Receiver, genuine, receiver

from agentpost.hub.a2a import targets
from hubproc import HubProcess, Setup, make_setup, poll

ATTACKS = [
    "http://169.254.169.254/latest/meta-data/",
    "http://127.0.0.1:8470/v1/admin/workspaces",
    "http://[::1]:8470/",
    "http://2130706433:8470/",
    "http://0x7f.1:8470/",
    "http://0177.0.0.1:8470/",
    "http://[::ffff:127.0.0.1]:8470/",
    "http://localhost:8470/",
    "http://10.0.0.7/",
    "http://[fd00::1]/",
    "http://0.0.0.0:8470/",
]
ALLOW_ALL = "127.0.0.0/8,::1,169.254.0.0/16,10.0.0.0/8,fc00::/7,0.0.0.0/32,localhost"


def _rpc(setup: Setup, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    with setup.hub.client(setup.tokens["alice"]) as c:
        answer: dict[str, Any] = c.post(f"/a2a/{setup.workspace}/bot", json=body).json()
    return answer


def _task(setup: Setup, mid: str) -> str:
    async def call(client: Any) -> Any:
        return await send(client, message("push me", mid))

    return str(run(with_client(setup.hub, setup.tokens["alice"], call)).id)


def _create(setup: Setup, task_id: str, url: str, config_id: str = "") -> dict[str, Any]:
    params = {"taskId": task_id, "url": url, **({"id": config_id} if config_id else {})}
    return _rpc(setup, "CreateTaskPushNotificationConfig", params)


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    made: list[Receiver] = []
    yield made
    for r in made:
        r.stop()


@pytest.fixture
def closed(make_hub: Callable[..., HubProcess]) -> Setup:
    return make_setup(make_hub("closed"), ["alice"], ["bot"])


@pytest.fixture
def opened(make_hub: Callable[..., HubProcess]) -> Setup:
    return make_setup(make_hub("opened", env={targets.ALLOW_ENV: ALLOW_ALL}), ["alice"], ["bot"])


def test_every_inward_target_is_refused_by_default_with_a_stable_code(closed: Setup) -> None:
    task_id = _task(closed, "t-closed")
    for url in ATTACKS:
        error = _create(closed, task_id, url)["error"]
        assert error["code"] == -32602, (url, error)
        assert error["data"][0]["metadata"]["code"] == "push_target_refused", (url, error)
        assert "AGENTPOST_PUSH_ALLOW" in error["message"], error
    listed = _rpc(closed, "ListTaskPushNotificationConfigs", {"taskId": task_id})
    assert listed["result"]["configs"] == []


def test_a_refused_target_in_send_message_posts_nothing(closed: Setup) -> None:
    req = {
        "message": {
            "messageId": "t-inline",
            "role": "ROLE_USER",
            "parts": [{"text": "hello"}],
        },
        "configuration": {"taskPushNotificationConfig": {"url": "http://2130706433:9/"}},
    }
    error = _rpc(closed, "SendMessage", req)["error"]
    assert error["data"][0]["metadata"]["code"] == "push_target_refused", error
    with closed.hub.client(closed.tokens["bot"]) as bot:
        assert bot.get("/v1/inbox").json()["items"] == []


def test_every_inward_target_is_allowed_by_the_operators_list(opened: Setup) -> None:
    task_id = _task(opened, "t-opened")
    for n, url in enumerate(ATTACKS):
        answer = _create(opened, task_id, url, f"c{n}")
        assert "result" in answer, (url, answer)
        if n == 9:  # a task takes at most 10 configs
            _rpc(opened, "DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "c9"})


def test_an_allowed_name_is_connected_at_its_checked_address_with_its_own_host(
    make_hub: Callable[..., HubProcess], receivers: list[Receiver]
) -> None:
    hook = receiver(receivers)
    setup = make_setup(make_hub(env={targets.ALLOW_ENV: "localhost"}), ["alice"], ["bot"])
    port = hook.url.split(":")[2].split("/")[0]
    decimal = f"http://2130706433:{port}/hook"
    task_id = _task(setup, "t-name")
    assert _create(setup, task_id, decimal)["error"]["data"][0]["metadata"]["code"] == (
        "push_target_refused"  # the name is allowed, not the address it resolves to
    )
    made = _create(setup, task_id, f"http://localhost:{port}/hook")["result"]
    bot_reads_and_answers(setup, task_id, _context(setup, task_id), "result", "fine")
    poll(lambda: hook.got, timeout=30)
    headers, body, _ = hook.got[0]
    assert headers["host"] == f"localhost:{port}"
    assert genuine(headers, body, made["signingSecret"])


def test_a_target_refused_at_send_time_is_a_logged_failure_not_a_connection(
    make_hub: Callable[..., HubProcess], receivers: list[Receiver]
) -> None:
    hook = receiver(receivers)
    hub = make_hub(env={targets.ALLOW_ENV: "127.0.0.1"})
    setup = make_setup(hub, ["alice"], ["bot"])
    task_id = _task(setup, "t-late")
    assert "result" in _create(setup, task_id, hook.url)
    hub.stop()  # the operator takes loopback off the list
    hub.env.pop(targets.ALLOW_ENV)
    hub.start()
    bot_reads_and_answers(setup, task_id, _context(setup, task_id), "result", "unheard")
    assert hub.log_path is not None
    log_path = hub.log_path
    poll(lambda: "is a loopback address" in log_path.read_text() or None, timeout=20)
    assert f"to {hook.url} refused" in log_path.read_text()
    assert hook.got == []


def test_a_forged_signature_fails_the_receivers_check(
    make_hub: Callable[..., HubProcess], receivers: list[Receiver]
) -> None:
    hook = receiver(receivers)
    setup = make_setup(make_hub(env={targets.ALLOW_ENV: "127.0.0.1"}), ["alice"], ["bot"])
    task_id = _task(setup, "t-sign")
    body = {"taskId": task_id, "url": hook.url, "token": "seen-on-the-wire"}
    made = _rpc(setup, "CreateTaskPushNotificationConfig", body)["result"]
    got = _rpc(setup, "GetTaskPushNotificationConfig", {"taskId": task_id})["result"]
    assert "signingSecret" not in got  # returned once, when made
    bot_reads_and_answers(setup, task_id, _context(setup, task_id), "result", "signed")
    poll(lambda: hook.got, timeout=30)
    headers, sent, _ = hook.got[0]
    assert headers["x-a2a-notification-token"] == "seen-on-the-wire"
    assert genuine(headers, sent, made["signingSecret"])
    assert not genuine(headers, sent, "seen-on-the-wire")  # what an eavesdropper has
    assert not genuine(headers, sent.replace(b"signed", b"forged"), made["signingSecret"])


def _context(setup: Setup, task_id: str) -> str:
    return str(_rpc(setup, "GetTask", {"id": task_id})["result"]["contextId"])


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("64:ff9b::a9fe:a9fe", "link-local"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("192.168.0.1", "private"),
        ("fd12::1", "unique-local"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("100.64.0.1", "not globally routable"),
        ("93.184.215.14", None),
    ],
)
def test_each_address_is_judged_by_what_it_reaches(address: str, why: str | None) -> None:
    assert targets.kind(ipaddress.ip_address(address)) == why


def test_one_inward_address_among_public_ones_refuses_the_name() -> None:
    public, inward = ipaddress.ip_address("93.184.215.14"), ipaddress.ip_address("127.0.0.1")
    with pytest.raises(targets.TargetRefused):
        targets.judge("mixed.example", [public, inward], targets.PushAllow())
    allow = targets.allow_list("127.0.0.0/8, [::1], hooks.internal., 10.0.0.0/33")
    assert targets.judge("mixed.example", [public, inward], allow) == public
    assert allow.hosts == frozenset({"hooks.internal"})  # the bad network is left out
