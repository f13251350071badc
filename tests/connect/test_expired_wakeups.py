"""A wake-up older than the hub's key lifetime (docs/connect.md "One Worker per agent"): the
Worker never runs it again, and says "this wake-up was not run" only when no reply of its
agent to it is in the room. Here the Worker is killed after posting its reply and before
acknowledging the wake-up, and restarted only once the hub has forgotten the reply's key.
(An unanswered one is still told "not run": tests/connect/test_turn_endings.py.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentpost.connect import keys
from conftest import AGENTS, Connected, agent_cmd, wait_for
from hubproc import HubProcess

TRICK = AGENTS / "trick_agent.py"
KEY_TTL = 12


@pytest.fixture
def hub(make_hub: Callable[..., HubProcess]) -> HubProcess:
    return make_hub(
        env={"AGENTPOST_SWEEP_INTERVAL": "0.3"},
        extra_args=["--key-ttl-seconds", str(KEY_TTL)],
    )


def test_an_answered_wake_up_past_the_key_lifetime_gets_no_false_not_run(
    connected: Connected, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"TRICK_MARKER_DIR": str(marks), "AGENTPOST_CONNECT_CRASH_POINT": "after_post"}
    w = connected.worker(agent_cmd(TRICK), env=env)
    e1 = connected.say("helper", "@bot once please")
    connected.wait_reply(e1["id"])
    assert w.proc is not None and w.proc.wait(60) == -9  # died right after the post
    with connected.hub.client(connected.setup.tokens["bot"]) as c:
        me = c.get("/v1/me").json()["member"]["id"]
        key = keys.turn_key(me, e1["id"])

        def forgotten() -> bool:
            r = c.get(f"/v1/rooms/{connected.setup.room}/sends", params={"key": key})
            return r.status_code == 404

        wait_for(forgotten, timeout=60)  # the hub swept the reply's key
    del w.env["AGENTPOST_CONNECT_CRASH_POINT"]
    w.start()
    wait_for(lambda: connected.acked() >= 1, timeout=60)
    replies = connected.replies_to(e1["id"])
    assert len(replies) == 1 and "was not run" not in replies[0]["text"]
    assert "its key has expired" in w.log()
    assert len(list(marks.glob("prompt-*"))) == 1  # never run again
