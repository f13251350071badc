"""One Worker per agent member (docs/architecture.md#one-worker-per-agent, docs/connect.md): the
hub's lease and its fencing numbers, a second Worker waiting as a standby, a takeover when the lease
lapses or on `--takeover`, and Turn keys that make two racing Workers replay, not post.
Real hub processes on both engines, real Worker processes, kill -9 from outside."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from faultproxy import Fault, FaultProxy, five_hundred

from conftest import AGENTS, Connected, agent_cmd, quiet_for, wait_for
from hubproc import HubProcess, fresh_workspace, make_setup

TRICK = AGENTS / "trick_agent.py"
LEASE_SECONDS = "3"


@pytest.fixture
def hub(make_hub: Callable[..., HubProcess]) -> HubProcess:
    """A hub whose Worker leases lapse 3 s after the last renewal (30 s by default)."""
    return make_hub(env={"AGENTPOST_WORKER_LEASE_SECONDS": LEASE_SECONDS})


@pytest.fixture
def connected(hub: HubProcess, tmp_path: Path) -> Any:
    s = make_setup(hub, ["alice", "carol"], ["bot", "helper"], workspace=fresh_workspace())
    c = Connected(s, tmp_path)
    yield c
    for w in c.workers:
        w.stop()


def _take(h: httpx.Client, worker_id: str, **extra: Any) -> httpx.Response:
    body = {"worker_id": worker_id, "host": "laptop", "pid": 4242, **extra}
    return h.post("/v1/worker/lease", json=body)


A, B = "a" * 32, "b" * 32


# -- the hub's rules, over HTTP ---------------------------------------------------------


def test_a_second_worker_is_refused_while_the_first_holds_the_lease(connected: Connected) -> None:
    with connected.hub.client(connected.setup.tokens["bot"]) as h:
        first = _take(h, A)
        assert first.status_code == 200, first.text
        assert first.json()["lease"]["fence"] == 1 and first.json()["replaced"] is None
        second = _take(h, B, host="server")
        assert second.status_code == 409
        err = second.json()["error"]
        assert err["code"] == "lease_held"
        assert err["holder"]["host"] == "laptop" and err["holder"]["pid"] == 4242
        assert "since" in err["holder"] and "laptop" in err["message"]
        # Renewing under the current fence works; the holder is unchanged.
        renewed = h.post("/v1/worker/lease/renew", json={"fence": 1})
        assert renewed.status_code == 200 and renewed.json()["lease"]["fence"] == 1


def test_takeover_gives_the_next_fence_and_the_old_one_is_refused_everywhere(
    connected: Connected,
) -> None:
    c = connected
    e1 = c.say("alice", "@bot one")
    with c.hub.client(c.setup.tokens["bot"]) as h:
        assert _take(h, A).json()["lease"]["fence"] == 1
        took = _take(h, B, host="server", takeover=True)
        assert took.status_code == 200
        assert took.json()["lease"]["fence"] == 2
        assert took.json()["replaced"]["host"] == "laptop"
        stale = h.post("/v1/worker/lease/renew", json={"fence": 1})
        assert stale.status_code == 409 and stale.json()["error"]["code"] == "lease_lost"
        assert "server" in stale.json()["error"]["message"]
        cursor = h.get("/v1/inbox", params={"after": 0}).json()["cursor"]
        refused = h.post("/v1/inbox/ack", json={"cursor": cursor, "fence": 1})
        assert refused.status_code == 409 and refused.json()["error"]["code"] == "lease_lost"
        assert c.acked() == 0  # the stale ack changed nothing
        ok = h.post("/v1/inbox/ack", json={"cursor": cursor, "fence": 2})
        assert ok.status_code == 200 and c.acked() == cursor
        assert h.post("/v1/worker/lease/release", json={"fence": 1}).status_code == 409
    assert e1["targets"] == ["bot"]


def test_the_same_worker_takes_its_own_live_lease_back_only_naming_its_last_fence(
    connected: Connected,
) -> None:
    """A Worker restarted on its workspace names the fence it last held; a copy of that
    workspace started elsewhere (same worker id, same host name) does not steal it."""
    with connected.hub.client(connected.setup.tokens["bot"]) as h:
        assert _take(h, A).json()["lease"]["fence"] == 1
        copy = _take(h, A)  # no last fence: a copy, not a restart
        assert copy.status_code == 409 and copy.json()["error"]["code"] == "lease_held"
        stale_copy = _take(h, A, last_fence=7)
        assert stale_copy.status_code == 409
        restarted = _take(h, A, last_fence=1)
        assert restarted.status_code == 200 and restarted.json()["lease"]["fence"] == 2
        assert _take(h, A, last_fence=1).status_code == 409  # fence 1 is history now


def test_a_released_lease_is_taken_at_once_and_a_lapsed_one_after_it_lapses(
    connected: Connected,
) -> None:
    with connected.hub.client(connected.setup.tokens["bot"]) as h:
        assert _take(h, A).status_code == 200
        assert h.post("/v1/worker/lease/release", json={"fence": 1}).status_code == 200
        assert h.get("/v1/worker/lease").json()["lease"]["live"] is False
        taken = _take(h, B, host="server")
        assert taken.status_code == 200 and taken.json()["lease"]["fence"] == 2
        # B stops renewing: A gets it once the lease lapses (3 s on this hub), not before.
        assert _take(h, A).status_code == 409
        got = wait_for(lambda: (r := _take(h, A)).status_code == 200 and r, timeout=20)
        assert got.json()["lease"]["fence"] == 3 and got.json()["replaced"] is None


def test_presence_shows_the_worker_that_holds_the_lease(connected: Connected) -> None:
    with connected.hub.client(connected.setup.tokens["bot"]) as h:
        _take(h, A)
    with connected.hub.client(connected.setup.tokens["alice"]) as h:
        ws = connected.setup.workspace
        bot = h.get(f"/v1/workspaces/{ws}/members/bot").json()["member"]
        listed = {m["name"]: m for m in h.get(f"/v1/workspaces/{ws}/members").json()["members"]}
    assert bot["worker"]["host"] == "laptop" and bot["worker"]["live"] is True
    assert listed["bot"]["worker"]["pid"] == 4242
    assert listed["alice"]["worker"] is None and listed["helper"]["worker"] is None


@pytest.mark.parametrize(
    "body",
    [
        {"worker_id": "not-hex", "host": "h", "pid": 1},
        {"worker_id": A, "host": "", "pid": 1},
        {"worker_id": A, "host": "h", "pid": -1},
        {"worker_id": A, "host": "h", "pid": 1, "extra": True},
        {"worker_id": A, "host": "h"},
    ],
)
def test_a_malformed_lease_request_is_refused_and_changes_nothing(
    connected: Connected, body: dict[str, Any]
) -> None:
    with connected.hub.client(connected.setup.tokens["bot"]) as h:
        r = h.post("/v1/worker/lease", json=body)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request"
        assert h.get("/v1/worker/lease").json()["lease"] is None
        for fence in (0, -1, "1", None):
            bad = h.post("/v1/worker/lease/renew", json={"fence": fence})
            assert bad.status_code == 400
            bad_ack = h.post("/v1/inbox/ack", json={"cursor": 0, "fence": fence})
            assert fence is None or bad_ack.status_code == 400


def test_a_person_takes_no_worker_lease(connected: Connected) -> None:
    with connected.hub.client(connected.setup.tokens["alice"]) as h:
        r = _take(h, A)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"


# -- Workers ----------------------------------------------------------------------------


def _replies(c: Connected, event_id: str) -> list[dict[str, Any]]:
    return c.replies_to(event_id)


def _prompts(folder: Path) -> int:
    return len(list(folder.glob("prompt-*")))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
    return ") Z " not in stat  # a zombie did its last work


def test_two_workers_for_one_agent_answer_each_wake_up_once(
    connected: Connected, tmp_path: Path
) -> None:
    c = connected
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"TRICK_MARKER_DIR": str(marks)}
    first = c.worker(agent_cmd(TRICK), env=env)
    second = c.worker(
        agent_cmd(TRICK), env=env, workspace=tmp_path / "ws-bot-2", log_name="bot-2",
        wait_agent=False,
    )
    wait_for(lambda: "standby: another Worker serves this agent" in second.log())
    assert second.log().count("standby:") == 1  # said once
    assert f"pid {first.proc.pid}" in second.log() if first.proc else False
    asked = [c.say("alice", f"@bot number {i}") for i in range(5)]
    for e in asked:
        c.wait_reply(e["id"])
    wait_for(lambda: c.acked() >= 5)
    quiet_for(1.0)
    for e in asked:
        assert len(_replies(c, e["id"])) == 1
    assert _prompts(marks) == 5  # each wake-up ran once
    assert "agent started" not in second.log()  # the standby never started its agent
    status = c.hub.client(c.setup.tokens["alice"])
    with status as h:
        bot = h.get(f"/v1/workspaces/{c.setup.workspace}/members/bot").json()["member"]
    assert first.proc is not None and bot["worker"]["pid"] == first.proc.pid


def test_the_standby_takes_over_when_the_holder_is_killed(
    connected: Connected, tmp_path: Path
) -> None:
    c = connected
    first = c.worker(agent_cmd(TRICK))
    second = c.worker(
        agent_cmd(TRICK), workspace=tmp_path / "ws-bot-2", log_name="bot-2", wait_agent=False
    )
    wait_for(lambda: "standby:" in second.log())
    e1 = c.say("alice", "@bot before")
    c.wait_reply(e1["id"])
    first.kill()  # SIGKILL: the lease is not released, it lapses
    e2 = c.say("alice", "@bot while nobody holds it")
    wait_for(lambda: "lease held: fence 2" in second.log(), timeout=30)
    wait_for(lambda: "agent started" in second.log(), timeout=60)
    assert c.wait_reply(e2["id"])["text"] == "trick: @bot while nobody holds it"
    e3 = c.say("alice", "@bot after")
    assert c.wait_reply(e3["id"])["text"] == "trick: @bot after"
    quiet_for(1.0)
    for e in (e1, e2, e3):
        assert len(_replies(c, e["id"])) == 1


def test_takeover_ends_the_old_workers_agent_at_once_and_the_reply_is_posted_once(
    connected: Connected, tmp_path: Path
) -> None:
    """The old Worker is mid-Turn when a person takes over: at its next renewal it learns
    the lease is gone, ends its agent at once (the slow Turn never finishes there) and waits
    as a standby; the new Worker runs the Turn and posts the reply, once."""
    c = connected
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"TRICK_MARKER_DIR": str(marks)}
    first = c.worker(agent_cmd(TRICK), env=env)
    e1 = c.say("helper", "@bot slow 3")
    wait_for(lambda: _prompts(marks) == 1)
    second = c.worker(
        agent_cmd(TRICK), "--takeover", env=env, workspace=tmp_path / "ws-bot-2",
        log_name="bot-2",
    )
    assert "took over the lease from the Worker on host" in second.log()
    first_agent = int((marks / "prompt-1").read_text())
    wait_for(lambda: "is no longer this agent's lease" in first.log(), timeout=30)
    wait_for(lambda: not _alive(first_agent), timeout=10)  # ended, not left to finish
    wait_for(lambda: "standby: another Worker serves this agent" in first.log(), timeout=30)
    assert first.proc is not None and first.proc.poll() is None  # waiting, not gone
    reply = c.wait_reply(e1["id"])
    assert (reply["text"], reply["reply_kind"]) == ("slow done 3", "result")
    wait_for(lambda: c.acked() >= 1)
    quiet_for(1.0)
    assert len(_replies(c, e1["id"])) == 1
    assert _prompts(marks) == 2  # once in the old Worker (ended), once in the new one


def test_a_copy_of_a_live_workers_folder_waits_as_a_standby_and_leaves_its_agent_alone(
    connected: Connected, tmp_path: Path
) -> None:
    """Same worker id, host and last fence as the live Worker: still not "the same Worker
    restarted", since that Worker's pid runs with the recorded start time."""
    c = connected
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"TRICK_MARKER_DIR": str(marks)}
    first = c.worker(agent_cmd(TRICK), env=env)
    e1 = c.say("alice", "@bot before")
    c.wait_reply(e1["id"])
    first_agent = int((marks / "prompt-1").read_text())
    copy = tmp_path / "ws-bot-copy"
    shutil.copytree(tmp_path / "ws-bot", copy)
    second = c.worker(
        agent_cmd(TRICK), env=env, workspace=copy, log_name="bot-copy", wait_agent=False
    )
    wait_for(lambda: "standby: another Worker serves this agent" in second.log())
    assert "still runs: this is a copy of its folder" in second.log()
    assert _alive(first_agent)  # the copy did not end the live Worker's agent
    e2 = c.say("alice", "@bot after the copy")
    assert c.wait_reply(e2["id"])["text"] == "trick: @bot after the copy"
    assert int((marks / "prompt-2").read_text()) == first_agent  # served by the first
    quiet_for(1.0)  # the standby asks again every 0.6 s: it stays a standby
    assert "lease held" not in second.log() and "agent started" not in second.log()
    assert "took over" not in second.log()
    with c.hub.client(c.setup.tokens["alice"]) as h:
        bot = h.get(f"/v1/workspaces/{c.setup.workspace}/members/bot").json()["member"]
    assert first.proc is not None and bot["worker"]["pid"] == first.proc.pid
    assert "lease lost" not in first.log()


def test_a_stopped_worker_hands_over_at_once(connected: Connected, tmp_path: Path) -> None:
    c = connected
    first = c.worker(agent_cmd(TRICK))
    second = c.worker(
        agent_cmd(TRICK), workspace=tmp_path / "ws-bot-2", log_name="bot-2", wait_agent=False
    )
    wait_for(lambda: "standby:" in second.log())
    assert first.stop() == 0  # SIGTERM: the lease is released on the way out
    wait_for(lambda: "agent started" in second.log(), timeout=30)
    e1 = c.say("alice", "@bot hi")
    assert c.wait_reply(e1["id"])["text"] == "trick: @bot hi"


def test_a_standby_worker_stops_cleanly_on_sigterm(connected: Connected, tmp_path: Path) -> None:
    c = connected
    c.worker(agent_cmd(TRICK))
    second = c.worker(
        agent_cmd(TRICK), workspace=tmp_path / "ws-bot-2", log_name="bot-2", wait_agent=False
    )
    wait_for(lambda: "standby:" in second.log())
    assert second.proc is not None
    os.kill(second.proc.pid, signal.SIGTERM)
    assert second.proc.wait(30) == 0


def test_a_post_naming_an_old_fence_is_refused_and_spends_no_key(connected: Connected) -> None:
    c = connected
    room = c.setup.room
    with c.hub.client(c.setup.tokens["bot"]) as h:
        _take(h, A)
        _take(h, B, host="server", takeover=True)  # fence 2 now
        stale = {"Idempotency-Key": "reply-1", "Agentpost-Worker-Fence": "1"}
        r = h.post(f"/v1/rooms/{room}/messages", json={"text": "late"}, headers=stale)
        assert r.status_code == 409 and r.json()["error"]["code"] == "lease_lost"
        files = {"file": ("a.txt", b"A", "text/plain")}
        m = h.post(f"/v1/rooms/{room}/media", files=files, headers=stale)
        assert m.status_code == 409 and m.json()["error"]["code"] == "lease_lost"
        assert all(e["text"] != "late" for e in c.events())
        assert not [e for e in c.events() if e["type"] == "media"]
        # The key was not spent: the current holder posts under it.
        fresh = {"Idempotency-Key": "reply-1", "Agentpost-Worker-Fence": "2"}
        ok = h.post(f"/v1/rooms/{room}/messages", json={"text": "late"}, headers=fresh)
        assert ok.status_code == 201 and ok.headers["idempotency-status"] == "created"
        for bad in ("0", "x", "-1", "1" * 30):
            r = h.post(
                f"/v1/rooms/{room}/messages",
                json={"text": "x"},
                headers={"Agentpost-Worker-Fence": bad},
            )
            assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_request"


def test_a_worker_that_cannot_renew_ends_its_agent_before_a_standby_takes_over(
    connected: Connected, tmp_path: Path
) -> None:
    """The holder cannot reach the hub (its renewals fail); the lease lapses on the hub and
    the standby runs the wake-up. The holder must not keep working meanwhile: it ends its
    agent by the time the lease lapses, then waits as a standby itself."""
    c = connected
    proxy = FaultProxy(c.hub.url).start()
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"TRICK_MARKER_DIR": str(marks)}
    try:
        first = c.worker(agent_cmd(TRICK), env={**env, "AGENTPOST_HUB": proxy.url})
        second = c.worker(
            agent_cmd(TRICK), env=env, workspace=tmp_path / "ws-bot-2", log_name="bot-2",
            wait_agent=False,
        )
        wait_for(lambda: "standby:" in second.log())
        e1 = c.say("alice", "@bot slow 8")
        wait_for(lambda: _prompts(marks) == 1)
        first_agent = int((marks / "prompt-1").read_text())
        cut_at = time.monotonic()
        for method in ("GET", "POST"):  # the holder's every request fails from now on
            proxy.arm(Fault(method, ".*", answer=five_hundred(), keyed=False, times=-1))
        wait_for(lambda: not _alive(first_agent), timeout=10)
        assert time.monotonic() - cut_at < 8  # before its slow Turn could have finished
        assert "the lease could not be renewed" in first.log()
        reply = c.wait_reply(e1["id"], timeout=60)
        assert reply["text"] == "slow done 8"
        wait_for(lambda: c.acked() >= 1)
        proxy.disarm()  # the old holder reaches the hub again: the lease is the other's now
        wait_for(lambda: "standby: another Worker serves this agent" in first.log(), timeout=30)
        quiet_for(1.0)
        assert len(_replies(c, e1["id"])) == 1
        assert _prompts(marks) == 2
    finally:
        for w in c.workers:
            w.stop()
        proxy.stop()
