"""The agent misbehaving (issue "connect", failure and bad input): a real Worker process,
a real hub, a real ACP agent subprocess (agents/trick_agent.py) for each case."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import AGENTS, Connected, agent_cmd, wait_for
from hubproc import HubProcess


# One hub per engine for this module: its tests never stop the hub or set its flags, and
# each gets a workspace of its own (`connected`).
@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


TRICK = AGENTS / "trick_agent.py"


def test_missing_agent_command_is_refused_at_start(connected: Connected) -> None:
    w = connected.worker("/no/such/agent --flag", start=False)
    proc = subprocess.run(
        [sys.executable, "-m", "agentpost", "connect", *w.args],
        env=w.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "agent command not found: /no/such/agent" in proc.stderr


def test_agent_crashing_at_start_gets_an_error_reply_not_silence(connected: Connected) -> None:
    w = connected.worker(
        agent_cmd(TRICK, "--crash-at-start"), "--turn-timeout", "4", wait_agent=False
    )
    wait_for(lambda: "agent did not start" in w.log())
    e1 = connected.say("helper", "@bot are you there")
    reply = connected.wait_reply(e1["id"])
    assert reply["reply_kind"] == "error"
    assert "could not be started" in reply["text"]
    assert "crashing at start as asked" in w.log()  # the stderr tail is in the Worker's log
    assert "crashing at start as asked" not in reply["text"]  # never in the room
    wait_for(lambda: connected.acked() >= 1)


def test_agent_crashing_mid_turn_is_said_in_the_room_and_restarted(connected: Connected) -> None:
    w = connected.worker(agent_cmd(TRICK))
    e1 = connected.say("helper", "@bot crash")
    reply = connected.wait_reply(e1["id"])
    assert reply["reply_kind"] == "error"
    assert "stopped mid-Turn; this Turn was lost" in reply["text"]
    assert reply["text"].startswith("about to crash")
    wait_for(lambda: w.log().count("agent started") >= 2)
    again = connected.say("alice", "@bot hello again")
    assert connected.wait_reply(again["id"])["text"] == "trick: @bot hello again"


def test_agent_printing_non_json_is_skipped_and_the_turn_answered(connected: Connected) -> None:
    w = connected.worker(agent_cmd(TRICK))
    e1 = connected.say("alice", "@bot junk")
    assert connected.wait_reply(e1["id"])["text"] == "after junk"
    assert "no JSON-RPC frame" in w.log()


def test_agent_sending_a_60_mb_frame_is_cut_off_and_restarted(connected: Connected) -> None:
    w = connected.worker(agent_cmd(TRICK))
    e1 = connected.say("helper", "@bot bigframe")
    reply = connected.wait_reply(e1["id"], timeout=120)
    assert reply["reply_kind"] == "error"
    assert "frame over" in reply["text"]
    wait_for(lambda: w.log().count("agent started") >= 2)
    again = connected.say("alice", "@bot still alive?")
    assert connected.wait_reply(again["id"])["text"] == "trick: @bot still alive?"


def test_agent_writing_1_mb_to_stderr_does_not_hang(connected: Connected) -> None:
    connected.worker(agent_cmd(TRICK))
    e1 = connected.say("alice", "@bot stderr")
    assert connected.wait_reply(e1["id"])["text"] == "after stderr"


def test_agent_never_answering_ends_in_an_error_receipt_at_the_turn_timeout(
    connected: Connected,
) -> None:
    connected.worker(agent_cmd(TRICK), "--turn-timeout", "2")
    e1 = connected.say("helper", "@bot hang")
    reply = connected.wait_reply(e1["id"], timeout=90)
    assert reply["reply_kind"] == "error"
    assert "time limit" in reply["text"]
    assert reply["targets"] == ["helper"]


def test_agent_gets_the_workers_environment_without_hub_tokens(connected: Connected) -> None:
    connected.worker(
        agent_cmd(TRICK), env={"TRICK_CUSTOM": "kept", "AGENTPOST_ADMIN_TOKEN": "secret"}
    )
    e1 = connected.say("alice", "@bot env")
    assert connected.wait_reply(e1["id"])["text"] == "token:absent admin:absent custom:kept"


def test_permission_requests_are_rejected_by_default(connected: Connected) -> None:
    w = connected.worker(agent_cmd(TRICK))
    e1 = connected.say("alice", "@bot perm")
    assert connected.wait_reply(e1["id"])["text"] == (
        "permission: opt-no-v2\n\n(the Worker refused the agent permission for: write a file)"
    )
    assert "rejected (reject_once)" in w.log()


def test_allow_permission_chooses_by_kind_not_by_option_id(connected: Connected) -> None:
    w = connected.worker(agent_cmd(TRICK), "--allow-permission", "allow_once")
    e1 = connected.say("alice", "@bot perm")
    assert connected.wait_reply(e1["id"])["text"] == "permission: opt-yes-v2"
    assert "allowed (allow_once)" in w.log()


def test_unknown_extension_request_gets_method_not_found(connected: Connected) -> None:
    connected.worker(agent_cmd(TRICK))
    e1 = connected.say("alice", "@bot ext")
    assert connected.wait_reply(e1["id"])["text"] == "ext error -32601"


def test_a_second_worker_on_the_same_workspace_is_refused(connected: Connected) -> None:
    first = connected.worker(agent_cmd(TRICK))
    second = subprocess.run(
        [sys.executable, "-m", "agentpost", "connect", *first.args],
        env=first.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 1
    assert "another Worker runs" in second.stderr


def test_an_agents_stderr_stays_in_the_log_redacted_never_in_the_room(
    connected: Connected,
) -> None:
    w = connected.worker(agent_cmd(TRICK))
    e1 = connected.say("helper", "@bot leak")
    reply = connected.wait_reply(e1["id"])
    assert reply["reply_kind"] == "error"
    assert "stopped mid-Turn" in reply["text"]
    assert "x-api-key" not in reply["text"] and "FAKE" not in reply["text"]
    wait_for(lambda: "invalid x-api-key [redacted]" in w.log())
    assert "FAKEFAKE" not in w.log()
    status = (connected.tmp / "ws-bot" / "status.json").read_text()
    assert "FAKEFAKE" not in status
