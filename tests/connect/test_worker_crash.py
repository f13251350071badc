"""kill -9 of the Worker (issue "connect"): mid-Turn, and after the post but before the
ack; and a hub outage during a Turn. On restart each reply is in the room exactly once."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from conftest import AGENTS, Connected, agent_cmd, quiet_for, wait_for
from hubproc import HubProcess, make_setup

TRICK = AGENTS / "trick_agent.py"


def _prompts(folder: Path) -> int:
    return len(list(folder.glob("prompt-*")))


def test_kill_9_mid_turn_then_restart_posts_the_reply_once(
    connected: Connected, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    w = connected.worker(agent_cmd(TRICK), env={"TRICK_MARKER_DIR": str(marks)})
    e1 = connected.say("helper", "@bot slow 3")
    wait_for(lambda: _prompts(marks) == 1)
    w.kill()
    assert connected.replies_to(e1["id"]) == []
    w.start()
    reply = connected.wait_reply(e1["id"])
    assert (reply["text"], reply["reply_kind"]) == ("slow done 3", "result")
    wait_for(lambda: connected.acked() >= 1)
    quiet_for(1.0)
    assert len(connected.replies_to(e1["id"])) == 1
    assert _prompts(marks) == 2  # the lost Turn ran again, once


def test_kill_9_after_the_post_before_the_ack_posts_once_and_never_reruns(
    connected: Connected, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    env = {"TRICK_MARKER_DIR": str(marks), "AGENTPOST_CONNECT_CRASH_POINT": "after_post"}
    w = connected.worker(agent_cmd(TRICK), env=env)
    e1 = connected.say("helper", "@bot once please")
    connected.wait_reply(e1["id"])
    assert w.proc is not None
    assert w.proc.wait(60) == -9  # it really died by SIGKILL, right after the post
    assert connected.acked() == 0
    del w.env["AGENTPOST_CONNECT_CRASH_POINT"]
    w.start()
    wait_for(lambda: connected.acked() >= 1)
    assert "was posted before" in w.log()
    assert len(connected.replies_to(e1["id"])) == 1
    assert _prompts(marks) == 1  # the agent was not asked again


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_hub_outage_during_a_turn_the_reply_waits_and_posts_once(
    make_hub: Callable[..., HubProcess], tmp_path: Path
) -> None:
    hub = make_hub(extra_args=["--port", str(_free_port())])
    c = Connected(make_setup(hub, ["alice", "carol"], ["bot", "helper"]), tmp_path)
    marks = tmp_path / "marks"
    marks.mkdir()
    try:
        w = c.worker(agent_cmd(TRICK), env={"TRICK_MARKER_DIR": str(marks)})
        e1 = c.say("helper", "@bot slow 4")
        wait_for(lambda: _prompts(marks) == 1)
        hub.kill()
        wait_for(lambda: "retrying" in w.log(), timeout=90)  # the reply found the hub down
        hub.start()
        reply = c.wait_reply(e1["id"], timeout=90)
        assert reply["reply_kind"] == "result"
        wait_for(lambda: c.acked() >= 1, timeout=90)
        assert len(c.replies_to(e1["id"])) == 1
        assert _prompts(marks) == 1
    finally:
        for worker in c.workers:
            worker.stop()


def test_kill_9_between_a_file_and_the_text_does_not_run_the_turn_again(
    connected: Connected, tmp_path: Path
) -> None:
    """The Turn journal (docs/connect.md "Turns"): part of the reply landed before the
    kill, so the restarted Worker says the Turn was interrupted instead of running the
    agent a second time; the file is in the room once."""
    marks = tmp_path / "marks"
    marks.mkdir()
    repo = tmp_path / "repo-bot"
    repo.mkdir()
    (repo / "out.txt").write_text("the first run's file\n")
    env = {"TRICK_MARKER_DIR": str(marks), "AGENTPOST_CONNECT_CRASH_POINT": "after_files"}
    w = connected.worker(agent_cmd(TRICK), env=env, repo=repo)
    e1 = connected.say("helper", f"@bot link {(repo / 'out.txt').as_uri()}")
    assert w.proc is not None
    assert w.proc.wait(60) == -9  # killed right after the file, before the text
    media = [e for e in connected.events() if e["type"] == "media"]
    assert len(media) == 1
    assert connected.replies_to(e1["id"]) == []
    (repo / "out.txt").write_text("a second run would make another file\n")
    del w.env["AGENTPOST_CONNECT_CRASH_POINT"]
    w.start()
    reply = connected.wait_reply(e1["id"])
    assert reply["reply_kind"] == "error"
    assert "interrupted after part of its reply was posted" in reply["text"]
    wait_for(lambda: connected.acked() >= 1)
    quiet_for(1.0)
    assert _prompts(marks) == 1  # the agent was not asked again
    assert len([e for e in connected.events() if e["type"] == "media"]) == 1
    assert len(connected.replies_to(e1["id"])) == 1
    assert not list((tmp_path / "ws-bot" / "turns").iterdir())  # the journal is done with
