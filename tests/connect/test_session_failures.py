"""`session/new` refused (docs/connect.md "When things go wrong"): said at once in the
Worker's log with the agent's message (redacted), in the room as a session failure with
the code (never as "could not be started", never with the agent's words), in `connect
status`; the agent is not restarted, and the next Turn opens its session when it can."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import AGENTS, Connected, agent_cmd, wait_for
from hubproc import HubProcess


@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


FAKE_KEY = "sk-ant-" + "FAKE" * 10


def _status(c: Connected) -> str:
    return subprocess.run(
        [sys.executable, "-m", "agentpost", "connect", "status", "--workspace-dir",
         str(c.tmp / "ws-bot")],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout


def test_a_refused_session_is_a_session_error_in_log_room_and_status(connected: Connected) -> None:
    refuse = connected.tmp / "refuse-sessions"
    refuse.touch()
    w = connected.worker(
        agent_cmd(AGENTS / "trick_agent.py"), env={"TRICK_REFUSE_SESSIONS": str(refuse)}
    )
    e1 = connected.say("helper", "@bot hello")  # a delegation: it gets an error receipt
    reply = connected.wait_reply(e1["id"])
    assert reply["reply_kind"] == "error"
    assert reply["text"] == (
        "(@bot: the agent refused to open a session: -32000 auth_required; this Turn was not "
        "run, and the Worker's log says more)"
    )
    log = w.log()
    assert "the agent refused to open a session: -32000 auth_required (for " in log
    assert "Authentication required (key [redacted])" in log
    assert FAKE_KEY not in log
    wait_for(lambda: "last session error" in _status(connected))
    line = next(x for x in _status(connected).splitlines() if "last session error" in x)
    assert "-32000 auth_required: Authentication required" in line and FAKE_KEY not in line

    refuse.unlink()  # the agent accepts sessions again: the same agent, no restart
    e2 = connected.say("alice", "@bot again")
    assert connected.wait_reply(e2["id"])["text"] == "trick: @bot again"
    assert w.log().count("agent started") == 1


def test_a_refused_session_of_a_persons_message_is_a_plain_reply(connected: Connected) -> None:
    refuse = connected.tmp / "refuse-sessions"
    refuse.touch()
    connected.worker(
        agent_cmd(AGENTS / "trick_agent.py"), env={"TRICK_REFUSE_SESSIONS": str(refuse)}
    )
    e1 = connected.say("alice", "@bot hello")
    reply = connected.wait_reply(e1["id"])
    assert reply["reply_kind"] is None
    assert "refused to open a session: -32000 auth_required" in reply["text"]
    assert "could not be started" not in reply["text"]
