"""No Turn ends in silence (docs/architecture.md#no-turn-ends-in-silence, docs/connect.md "When the
agent fails"): every way a Turn can end posts one visible reply or notice, a delegation gets its
receipt, the agent is restarted when its connection cannot be read, and the inbox cursor moves on.
Real Worker processes, a real hub, a hand-written ACP agent (agents/raw_agent.py) that answers
in shapes the SDK would never send."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import AGENTS, Connected, agent_cmd, wait_for
from hubproc import HubProcess, make_setup


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


RAW = AGENTS / "raw_agent.py"


def _cursor_of(c: Connected, event_id: str) -> int:
    with c.hub.client(c.setup.tokens["bot"]) as h:
        items = h.get("/v1/inbox", params={"after": 0, "limit": 1000}).json()["items"]
    return next(i["cursor"] for i in items if i["event"]["id"] == event_id)


def _one_reply(c: Connected, event_id: str) -> dict:
    reply = c.wait_reply(event_id)
    wait_for(lambda: c.acked() >= _cursor_of(c, event_id))
    assert len(c.replies_to(event_id)) == 1
    return reply


@pytest.mark.parametrize("shape", ["badstop", "nullresult", "strresult"])
def test_a_prompt_answer_the_sdk_rejects_ends_in_an_error_reply_and_a_restart(
    connected: Connected, shape: str
) -> None:
    w = connected.worker(agent_cmd(RAW))
    e1 = connected.say("helper", f"@bot {shape}")
    reply = _one_reply(connected, e1["id"])
    assert reply["reply_kind"] == "error"  # helper delegated: its receipt says failed
    assert reply["text"].startswith(f"about to answer {shape}")
    assert "cannot be read; it is restarted" in reply["text"]
    assert "malformed result" in reply["text"]
    wait_for(lambda: w.log().count("agent started") >= 2)
    # The next Turn runs on the restarted agent and is acknowledged like any other.
    e2 = connected.say("alice", "@bot hello again")
    assert _one_reply(connected, e2["id"])["text"] == "raw: @bot hello again"
    # The receipt reached the delegator.
    assert reply["id"] in [e["id"] for e in connected.inbox("helper")]


@pytest.mark.parametrize("shape", ["strerror", "codeerror"])
def test_an_error_frame_of_the_wrong_shape_is_an_error_reply_and_the_connection_lives(
    connected: Connected, shape: str
) -> None:
    w = connected.worker(agent_cmd(RAW))
    e1 = connected.say("helper", f"@bot {shape}")
    reply = _one_reply(connected, e1["id"])
    assert reply["reply_kind"] == "error"
    assert "the agent answered the prompt with an error (code -32603)" in reply["text"]
    assert "the Worker's log has its message" in reply["text"]
    assert "boom" not in reply["text"]  # the agent's own words stay in the log
    wait_for(lambda: "the agent sent a malformed error" in w.log())
    # One string error used to end the SDK's receive loop for good: every later Turn
    # failed. Here the same agent process answers the next one.
    e2 = connected.say("alice", "@bot still there")
    assert _one_reply(connected, e2["id"])["text"] == "raw: @bot still there"
    assert w.log().count("agent started") == 1


def test_an_answer_with_an_id_that_is_no_id_is_skipped(connected: Connected) -> None:
    w = connected.worker(agent_cmd(RAW))
    e1 = connected.say("alice", "@bot listid")
    assert _one_reply(connected, e1["id"])["text"] == "after listid"
    assert "neither a request nor an answer" in w.log()


def test_a_reply_the_hub_refuses_is_replaced_by_a_notice_and_the_delegator_told(
    connected: Connected,
) -> None:
    with connected.hub.client(connected.setup.tokens["alice"]) as h:
        r = h.patch(f"/v1/rooms/{connected.setup.room}", json={"sensitive_filter": True})
        assert r.status_code == 200, r.text
    connected.worker(agent_cmd(RAW))
    e1 = connected.say("helper", "@bot secret")
    notice = _one_reply(connected, e1["id"])
    assert "AKIA" not in notice["text"]
    assert "the hub refused it (command_rejected, sensitive_data)" in notice["text"]
    assert notice["reply_kind"] == "error"
    assert notice["metadata"]["agentpost/notice"] == "reply_refused"
    wait_for(lambda: notice["id"] in [e["id"] for e in connected.inbox("helper")])
    # A person who asked is told too.
    e2 = connected.say("alice", "@bot secret")
    told = _one_reply(connected, e2["id"])
    assert told["reply_kind"] is None and "refused" in told["text"]
    assert told["id"] in [e["id"] for e in connected.inbox("alice")]


def test_a_bug_of_the_worker_mid_turn_still_ends_in_a_reply_and_an_ack(
    connected: Connected,
) -> None:
    w = connected.worker(agent_cmd(RAW), env={"AGENTPOST_CONNECT_FAIL_POINT": "turn_start"})
    e1 = connected.say("helper", "@bot hello")
    reply = _one_reply(connected, e1["id"])
    assert reply["reply_kind"] == "error"
    assert "the Worker failed on this Turn: RuntimeError" in reply["text"]
    assert "fail point turn_start reached" in w.log()


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_a_reply_past_the_limit_says_it_was_cut_and_is_not_buffered(
    connected: Connected,
) -> None:
    w = connected.worker(agent_cmd(RAW))
    chunks = 300  # 300 MiB of text streamed in 1 MiB chunks
    e1 = connected.say("alice", f"@bot big {chunks}")
    reply = _one_reply(connected, e1["id"])
    total = chunks * 1024 * 1024
    assert f"(cut: the reply was {total:,} characters; only the first 60,000 are posted)" in (
        reply["text"]
    )
    assert reply["text"].startswith("y" * 60000)
    assert w.proc is not None
    # Keeping the whole text would take ≥ 300 MiB; the Worker keeps 60,000 characters.
    assert _peak_rss_kib(w.proc.pid) < 200 * 1024


def test_a_wake_up_older_than_the_hubs_key_lifetime_is_not_run_but_answered(
    make_hub: Callable[..., HubProcess], tmp_path: Path
) -> None:
    """On a hub that keeps keys 10 s, a wake-up is run within 9 s of its event only (past
    that an earlier reply could not be found by its key, and the Turn could run twice);
    an older one gets a reply saying why it was not run. Delivery is not declared there."""
    hub = make_hub(extra_args=["--key-ttl-seconds", "10"])
    c = Connected(make_setup(hub, ["alice", "carol"], ["bot", "helper"]), tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    old = c.say("helper", "@bot from long ago")
    made = time.time()
    wait_for(lambda: time.time() - made > 10, timeout=30)  # the key lifetime passes
    try:
        w = c.worker(agent_cmd(RAW), env={"RAW_MARKER_DIR": str(marks)})
        reply = _one_reply(c, old["id"])
        assert reply["reply_kind"] == "error"
        assert "this wake-up was not run: it is older than the hub keeps reply keys" in (
            reply["text"]
        )
        assert not list(marks.iterdir())  # the agent was never prompted
        fresh = c.say("alice", "@bot now")
        assert _one_reply(c, fresh["id"])["text"] == "raw: @bot now"
        assert "the hub keeps Idempotency-Keys 10 s; deliveries need 86400 s" in w.log()
    finally:
        for worker in c.workers:
            worker.stop()


def test_a_worker_killed_between_a_refused_reply_and_its_notice_posts_the_notice_at_restart(
    connected: Connected, tmp_path: Path
) -> None:
    with connected.hub.client(connected.setup.tokens["alice"]) as h:
        r = h.patch(f"/v1/rooms/{connected.setup.room}", json={"sensitive_filter": True})
        assert r.status_code == 200, r.text
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"RAW_MARKER_DIR": str(marks), "AGENTPOST_CONNECT_CRASH_POINT": "after_reply_refused"}
    w = connected.worker(agent_cmd(RAW), env=env)
    e1 = connected.say("helper", "@bot secret")
    assert w.proc is not None
    assert w.proc.wait(60) == -9  # killed after the refusal, before the notice
    assert connected.replies_to(e1["id"]) == []
    del w.env["AGENTPOST_CONNECT_CRASH_POINT"]
    w.start()
    notice = _one_reply(connected, e1["id"])
    assert notice["reply_kind"] == "error" and "the hub refused it" in notice["text"]
    assert len(list(marks.iterdir())) == 1  # the agent was not asked again


def test_a_worker_bug_after_the_reply_landed_says_nothing_false(connected: Connected) -> None:
    w = connected.worker(agent_cmd(RAW), env={"AGENTPOST_CONNECT_FAIL_POINT": "after_post"})
    e1 = connected.say("helper", "@bot hello")
    reply = _one_reply(connected, e1["id"])
    assert reply["text"] == "raw: @bot hello" and reply["reply_kind"] == "result"
    assert "fail point after_post reached" in w.log()
    assert len(connected.replies_to(e1["id"])) == 1  # no "was not posted" notice after it
