"""Turns with the example agent (docs/delegation.md, docs/connect.md "The reply"): reply kinds,
files, cancellation, who gets a Turn, and `connect status`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import AGENTS, Connected, agent_cmd, quiet_for, wait_for
from hubproc import HubProcess


# One hub per engine for this module: its tests never stop the hub or set its flags, and
# each gets a workspace of its own (`connected`).
@pytest.fixture
def hub(shared_hub: HubProcess) -> HubProcess:
    return shared_hub


TRICK = AGENTS / "trick_agent.py"


def test_needs_input_from_the_final_message_meta_is_the_reply_kind(connected: Connected) -> None:
    connected.worker()
    e1 = connected.say("helper", "@bot ask me")
    reply = connected.wait_reply(e1["id"])
    assert (reply["reply_kind"], reply["text"]) == ("needs_input", "Which one do you mean?")


def test_a_persons_question_gets_a_plain_reply_without_reply_kind(connected: Connected) -> None:
    connected.worker()
    e1 = connected.say("alice", "@bot ask me")
    assert connected.wait_reply(e1["id"])["reply_kind"] is None


def test_the_example_agent_returns_a_file_as_media(connected: Connected) -> None:
    connected.worker()
    e1 = connected.say("alice", "@bot file notes.txt please")
    reply = connected.wait_reply(e1["id"])
    assert reply["text"] == "here is notes.txt"
    media = [e for e in connected.events() if e["type"] == "media"]
    assert [m["attachments"][0]["name"] for m in media] == ["notes.txt"]


def test_slash_stop_cancels_the_running_turn(connected: Connected) -> None:
    w = connected.worker()
    e1 = connected.say("alice", "@bot sleep 60")
    wait_for(lambda: "session " in w.log())
    connected.say("alice", "/stop")
    reply = connected.wait_reply(e1["id"], timeout=45)
    assert reply["text"].startswith("stopped early")
    assert "cancelled" in reply["text"]
    assert reply["reply_kind"] is None


def test_cancel_route_on_a_delegation_replies_cancelled(connected: Connected) -> None:
    w = connected.worker()
    e1 = connected.say("helper", "@bot sleep 60")
    wait_for(lambda: "session " in w.log())
    with connected.hub.client(connected.setup.tokens["carol"]) as c:
        assert c.post(f"/v1/rooms/{connected.setup.room}/cancel", json={"agent": "bot"}).status_code == 201
    reply = connected.wait_reply(e1["id"], timeout=45)
    assert reply["reply_kind"] == "cancelled"
    assert reply["targets"] == ["helper"]


def test_someone_else_gets_no_turn_and_one_notice_per_room(connected: Connected) -> None:
    w = connected.worker()
    first = connected.say("carol", "@bot hi")
    notice = connected.wait_reply(first["id"])
    assert notice["text"] == "@bot answers only its owner (alice) and listed collaborators."
    assert notice["targets"] == ["carol"]
    second = connected.say("carol", "@bot hello??")
    wait_for(lambda: connected.acked() >= 2)
    quiet_for(0.5)
    assert connected.replies_to(second["id"]) == []
    assert w.log().count("no Turn for carol") == 2


def test_a_listed_collaborator_gets_a_turn(connected: Connected) -> None:
    connected.worker(None, "--collaborator", "carol")
    e1 = connected.say("carol", "@bot hi")
    assert connected.wait_reply(e1["id"])["text"] == "echo: @bot hi"


def test_sighup_rereads_the_collaborators_file(connected: Connected) -> None:
    w = connected.worker()
    (connected.tmp / "ws-bot" / "collaborators").write_text("carol  # trusted\n")
    assert w.proc is not None
    w.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "collaborators: carol" in w.log())
    e1 = connected.say("carol", "@bot hi")
    assert connected.wait_reply(e1["id"])["text"] == "echo: @bot hi"


def test_trigger_attachments_reach_the_agent_as_resource_links(connected: Connected) -> None:
    connected.worker(agent_cmd(TRICK))
    with connected.hub.client(connected.setup.tokens["alice"]) as c:
        up = c.post(
            f"/v1/rooms/{connected.setup.room}/media", files={"file": ("in.txt", b"input")}
        ).json()
        r = c.post(
            f"/v1/rooms/{connected.setup.room}/messages",
            json={"text": "@bot look", "attachments": [up["media"]["id"]]},
        )
    e1 = r.json()["event"]
    assert connected.wait_reply(e1["id"])["text"] == "trick: @bot look"
    saved = list((connected.tmp / "ws-bot" / "files").glob(f"session-*/{e1['id']}/*"))
    assert [p.read_bytes() for p in saved] == [b"input"]
    assert oct(saved[0].stat().st_mode & 0o777) == "0o600"


def test_connect_status_shows_worker_agent_sessions_cursor_and_turns(connected: Connected) -> None:
    w = connected.worker()
    e1 = connected.say("alice", "@bot status check")
    connected.wait_reply(e1["id"])
    wait_for(lambda: connected.acked() >= 1)
    ws = connected.tmp / "ws-bot"

    def status() -> dict:  # type: ignore[type-arg]
        out = subprocess.run(
            [sys.executable, "-m", "agentpost", "connect", "status", "--workspace-dir", str(ws), "--json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        return json.loads(out)  # type: ignore[no-any-return]

    data = wait_for(lambda: (s := status())["inbox"]["acked"] >= 1 and s)
    assert data["running"] is True
    assert data["worker_id"] == (ws / "worker-id").read_text().strip()
    assert data["agent"]["alive"] is True
    assert [(s["who"], s["room"]) for s in data["sessions"]] == [("alice", connected.setup.room)]
    assert [(t["trigger"], t["outcome"]) for t in data["turns"]] == [(e1["id"], "end_turn")]
    assert data["counters"]["replies"] == 1
    w.stop()
    assert status()["running"] is False
    human = subprocess.run(
        [sys.executable, "-m", "agentpost", "connect", "status", "--workspace-dir", str(ws)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert human.returncode == 0 and "end_turn" in human.stdout


def test_status_of_an_empty_folder_says_not_running(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agentpost", "connect", "status", "--workspace-dir", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0
    data = json.loads(out.stdout)
    assert (data["running"], data["worker_id"]) == (False, None)


def test_worker_files_are_private(connected: Connected) -> None:
    connected.worker()
    ws = connected.tmp / "ws-bot"
    wait_for(lambda: (ws / "status.json").exists())
    # The delivery ledger's WAL side files too (SQLite gives them the database file's mode).
    ledger = ("deliveries.sqlite3", "deliveries.sqlite3-wal", "deliveries.sqlite3-shm")
    wait_for(lambda: all((ws / name).exists() for name in ledger))
    for name in ("worker-id", "worker.lock", "status.json", "lease-fence", *ledger):
        assert oct((ws / name).stat().st_mode & 0o777) == "0o600", name
    assert oct(ws.stat().st_mode & 0o777) == "0o700"


def test_text_before_and_after_a_tool_call_is_set_apart_and_tokens_stay_joined(
    connected: Connected,
) -> None:
    connected.worker(agent_cmd(AGENTS / "trick_agent.py"))
    e1 = connected.say("alice", "@bot tools")
    # "Let me " + "do that." are one run; a tool call starts a new run ("\n\n"); a mode
    # update mid-word does not; text that has its newlines already gets no more.
    assert connected.wait_reply(e1["id"])["text"] == "Let me do that.\n\ndone and dusted.\n\nLast."
